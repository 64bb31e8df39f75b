"""Ties are judged as ties (``properties.ties``): relabelling token ids inside the tie classes of
any conforming engine's answer never changes a verdict, and relabelling across classes does.

Each conforming member (and gpu_impl) answers tie-rich rows: plateaus of equal logits at a top_k /
top_p / min_p cut, tied maxima for a selector, rows whose float32 probabilities underflow to 0
with ``min_keep`` restoring among them. The answer is then relabelled by a permutation that maps
every tie class of the record onto itself, drawn afresh for every call (two calls of one test may
choose different tied tokens, as an unstable sort does), and judged again by the same property
bodies the suite runs (``checks.check_matches_oracle``, ``check_monotone``, ``check_noop``) and
by the logprobs' top-n judge. The other way: greedy has no tie freedom (the first maximum,
exactly), and a relabelling that moves a kept token to an untied dropped one is a failure.
"""
from __future__ import annotations

import importlib
import zlib

import numpy as np
import pytest

import gpu_impl
from properties import ties
from properties.backends import Impl
from properties.engines.logprobs_checks import exact, judge_top_n
from properties.failure import Failure
from properties.samplers import checks
from properties.samplers.records import record_named
from properties.samplers.strategies import Case, make_logits
from properties.zoo.conforming import MEMBERS

ENGINES = ("gpu_impl",) + tuple(f"properties.zoo.conforming.{m}" for m in MEMBERS)
TIED = ("top_k", "top_p", "min_p", "typical", "top_n_sigma", "xtc", "mirostat_v2")


class Relabelled:
    """An engine whose every answer is relabelled inside the record's tie classes (``across``:
    across classes instead, moving one kept token to the highest dropped token of another class)."""

    def __init__(self, base: Impl, record, seed: int, across: bool = False) -> None:
        self.base, self.record, self.seed, self.across = base, record, seed, across
        self.moved = 0

    def __call__(self, fn: str, *args):
        out = self.base(fn, *args)
        if fn != self.record.impl_name:
            return out
        # one permutation per (row, parameters): calls with other parameters choose other tied
        # tokens, as an unstable sort may, and a row asked twice alike answers alike (batch invariance)
        x64 = np.asarray(args[0]).astype(np.float64)
        rest = [np.asarray(a) for a in args[1:]]
        self.rngs = [np.random.default_rng([self.seed, zlib.crc32(x64[b].tobytes() + b"".join(
            (a[b] if a.ndim and a.shape[0] == x64.shape[0] else a).tobytes() for a in rest))])
            for b in range(x64.shape[0])]
        x = np.asarray(args[0]).astype(np.float32)
        rows = [x[b].astype(np.float64) for b in range(x.shape[0])]
        if self.record.kind == "select":
            ids = np.asarray(out[0] if isinstance(out, tuple) else out).copy()
            for b, row in enumerate(rows):
                perm = self._perm(row, np.eye(row.size, dtype=bool)[ids[b]], b)
                ids[b] = perm[ids[b]]
            return (ids,) + tuple(out[1:]) if isinstance(out, tuple) else ids
        out = np.asarray(out).copy()
        for b, row in enumerate(rows):
            kept = np.isfinite(out[b])
            moved = np.zeros_like(kept)
            moved[self._perm(row, kept, b)] = kept
            out[b] = np.where(moved, x[b], np.float32(-np.inf))
        return out

    def _perm(self, row: np.ndarray, kept: np.ndarray, b: int) -> np.ndarray:
        classes = self.record.ties(row) if self.record.ties is not None else ties.logit_classes(row)
        perm = ties.relabel(classes, self.rngs[b])
        if self.across:  # swap the lowest-ranked kept token with the best dropped token of another class
            perm = np.arange(row.size)
            fin = np.isfinite(row)
            inside, outside = np.flatnonzero(kept & fin), np.flatnonzero(~kept & fin)
            if inside.size and outside.size:
                a = inside[np.argmin(row[inside])]
                others = outside[classes[outside] != classes[a]]
                if others.size:
                    c = others[np.argmax(row[others])]
                    perm[a], perm[c] = c, a
                    self.moved += 1
        else:
            self.moved += int((perm != np.arange(row.size))[kept].any())
        return perm


def _verdict(body, *args) -> str | None:
    try:
        body(*args)
    except Failure as exc:
        return f"{exc.property}: {exc.why}"
    return None


def _rows(vocab: int = 48) -> list[np.ndarray]:
    """Tie-rich rows: plateaus (a few levels shared by many tokens), four tied maxima, and a peak
    far above the rest (every other float32 probability an underflowed zero)."""
    plateaus = [make_logits("plateaus", vocab, s) for s in range(4)]
    tied_top = np.full(vocab, -3.0, dtype=np.float32)
    tied_top[[5, 17, 30, vocab - 7]] = 2.0
    tied_top[::7] = -1.0
    peak = (-150.0 - np.arange(vocab, dtype=np.float32) * 0.5)[::-1].copy()
    peak[7] = 20.0
    return plateaus + [tied_top, peak]


def _params(name: str, batch: int, vocab: int) -> list[dict]:
    full = lambda v, dt=np.float64: np.full(batch, v, dtype=dt)  # noqa: E731
    return {
        "top_k": [{"k": full(k, np.int64)} for k in (1, 3, 10, 25)],
        "top_p": [{"p": full(p), "min_keep": full(m, np.int64)} for p, m in ((0.3, 0), (0.6, 3), (0.9, 0), (1.0, 0))],
        "min_p": [{"p": full(p), "min_keep": full(m, np.int64)} for p, m in ((0.5, 0), (0.05, 3), (0.9, 5))],
        "typical": [{"p": full(p), "min_keep": full(m, np.int64)} for p, m in ((0.3, 0), (0.7, 3))],
        "top_n_sigma": [{"n": full(n)} for n in (0.5, 1.0)],
        "xtc": [{"probability": full(1.0), "threshold": full(t), "min_keep": full(0, np.int64),
                 "chance": full(0.0, np.float32)} for t in (0.05, 0.1)],
        "mirostat_v2": [{"mu": full(mu), "u": full(u), "tau": full(3.0), "eta": full(0.1)}
                        for mu, u in ((0.5, 0.3), (0.5, 0.9), (3.0, 0.5))],
        "greedy": [{}],
    }[name]


def _cases(name: str) -> list[Case]:
    rows = np.stack(_rows()).astype(np.float32)
    return [Case("ties", rows.shape[1], "float32", tuple(range(rows.shape[0])), p, rows)
            for p in _params(name, rows.shape[0], rows.shape[1])]


def _engines_for(name: str) -> list[str]:
    out = []
    for e in ENGINES:
        mod = importlib.import_module(e)
        if e == "gpu_impl" or name in getattr(mod, "REPLACED", ()):
            out.append(e)
    return out


@pytest.mark.parametrize("name, engine", [(n, e) for n in TIED for e in _engines_for(n)])
def test_relabelling_inside_tie_classes_never_changes_a_verdict(name, engine):
    record = record_named(name)
    base = Impl(importlib.import_module(engine), "numpy")
    moved = 0
    for i, case in enumerate(_cases(name)):
        plain = _verdict(checks.check_matches_oracle, base, record, case)
        assert plain is None, f"{engine} (a conforming engine) fails {name} on {case}: {plain}"
        relabelled = Relabelled(base, record, seed=i)
        got = _verdict(checks.check_matches_oracle, relabelled, record, case)
        assert got == plain, f"{engine}'s {name} answer relabelled inside its tie classes: {got}"
        if record.monotone:
            param = record.monotone[0][0]
            other = case.params[param] * (2 if record.kind == "filter" and name != "min_p" else 0.5)
            if name == "top_k":
                other = case.params[param] + 7
            for impl in (base, Relabelled(base, record, seed=100 + i)):
                assert _verdict(checks.check_monotone, impl, record, case, other) is None, (engine, name, case)
        moved += relabelled.moved
    assert moved, f"no answer of {engine}'s {name} had a tied token to relabel: the rows test nothing"


@pytest.mark.parametrize("name", [n for n in TIED if record_named(n).noop])
def test_noop_relabelled_is_still_a_noop(name):
    """A no-op answer relabelled inside ties stays a no-op: a probability filter may drop the
    tokens whose float32 probability is 0 (TopPLogitsWarper(1.0) does), nothing else moves."""
    record = record_named(name)
    for engine in _engines_for(name):
        base = Impl(importlib.import_module(engine), "numpy")
        for case in _cases(name)[:1]:
            for noop in record.noop:
                assert _verdict(checks.check_noop, base, record, case, noop) is None, (engine, noop)
                assert _verdict(checks.check_noop, Relabelled(base, record, 7), record, case, noop) is None


@pytest.mark.parametrize("name", ["top_k", "top_p", "min_p", "top_n_sigma"])
def test_relabelling_across_classes_fails(name):
    """The other way: a kept token traded for an untied dropped one is a wrong answer."""
    record = record_named(name)
    base = Impl(gpu_impl, "numpy")
    failed = 0
    for i, case in enumerate(_cases(name)):
        wrong = Relabelled(base, record, seed=i, across=True)
        failed += _verdict(checks.check_matches_oracle, wrong, record, case) is not None
        assert wrong.moved or failed
    assert failed, f"{name}: no cross-class relabelling was caught"


def test_greedy_keeps_demanding_the_first_maximum():
    """greedy's rule is deterministic (a linear scan: the first maximum), so it has no tie
    freedom: another of the tied maxima is a failure, the first one passes."""
    record = record_named("greedy")
    assert record.ties is None
    case = _cases("greedy")[0]
    base = Impl(gpu_impl, "numpy")
    assert _verdict(checks.check_matches_oracle, base, record, case) is None
    last_max = lambda x: (x.shape[1] - 1 - np.argmax(x[:, ::-1], axis=1)).astype(np.int64)  # noqa: E731
    wrong = Impl(type("LastMax", (), {"greedy": staticmethod(last_max), "__name__": "last_max"}), "numpy")
    assert "selection" in (_verdict(checks.check_matches_oracle, wrong, record, case) or "")


def test_tie_classes_are_data():
    row = np.array([1.0, 3.0, 3.0, -np.inf, 1.0, 0.0, -300.0, -400.0])
    assert ties.logit_classes(row).tolist() == [1, 0, 0, -1, 1, 2, 3, 4]
    assert ties.prob_classes(row).tolist() == [1, 0, 0, -1, 1, 2, 3, 3]  # both below 2^-126: zeros
    assert ties.interchangeable(6, 7, ties.prob_classes(row)) and not ties.interchangeable(6, 7, ties.logit_classes(row))
    assert not ties.interchangeable(3, 3 - 1, ties.logit_classes(row))
    kept = np.array([0, 1, 0, 0, 1, 0, 0, 1], dtype=bool)
    cls = ties.prob_classes(row)
    assert ties.canonical(kept, cls).tolist() == [True, True, False, False, False, False, True, False]  # lowest ids
    assert ties.close(np.eye(8, dtype=bool)[1], cls).tolist() == [False, True, True] + [False] * 5
    perm = ties.relabel(cls, np.random.default_rng(3))
    assert (cls[perm] == cls).all() and sorted(perm) == list(range(8))
    assert ties.canonical_ids(np.array([2, 1, 7, 6]), cls).tolist() == [1, 2, 6, 7]


@pytest.mark.parametrize("engine", ["torch_topk", "gpu_impl"])
def test_top_n_logprobs_any_order_among_equal_values(engine):
    """torch.topk defines no order among equal values, masked pads included: any order of them
    passes, a strictly smaller value listed first fails."""
    import torch
    from gpu_impl import engines as ge

    rows = np.stack(_rows(40)[:4] + [np.where(np.arange(40) % 9 == 0, 1.0, -np.inf).astype(np.float32)])
    rows = rows.astype(np.float32)
    for n in (3, 8, 12):
        if engine == "torch_topk":
            lp = torch.log_softmax(torch.from_numpy(rows), dim=-1)
            vals, ids = torch.topk(lp, n, dim=-1)
            ids, vals = ids.numpy(), vals.numpy()
        else:
            ids, vals = (np.asarray(a) for a in ge.logprobs_top_n(rows.copy(), n))
        m = exact(rows)
        judge_top_n("top_n", "ties", rows, n, ids, vals, m)
        rng = np.random.default_rng(n)
        for b in range(rows.shape[0]):  # relabel inside runs of equal logits, the -inf pads included
            key = np.where(np.isfinite(rows[b]), rows[b], -1e30)
            perm = ties.relabel(ties.tie_classes(key), rng)
            ids[b] = perm[ids[b]]
        judge_top_n("top_n", "ties", rows, n, ids, vals, m)
    first, last = ids[0, 0], ids[0, -1]
    if rows[0, first] > rows[0, last]:  # a strictly larger value moved behind a smaller one
        swapped, svals = ids.copy(), vals.copy()
        swapped[0, [0, -1]], svals[0, [0, -1]] = swapped[0, [-1, 0]], svals[0, [-1, 0]]
        with pytest.raises(Failure):
            judge_top_n("top_n", "ties", rows, 12, swapped, svals, m)


def test_hf_min_p_restores_among_underflowed_zeros():
    """transformers' own MinPLogitsWarper restores ``min_tokens_to_keep`` by
    ``torch.topk(probs, k)``: among tokens whose float32 probability is 0 it keeps whichever topk
    returns (not the largest logits). The peers' judge ties them for a warper deciding on
    probabilities; without that tie the same answer is rejected."""
    import torch
    from transformers import MinPLogitsWarper

    from oracle.engines import transformers as o_hf
    from properties.peers.transformers.legality import check_kept

    row = np.concatenate([[30.0], -150.0 - np.arange(20) * 0.5])
    params = {"m": 0.5, "mk": 3}
    hf = MinPLogitsWarper(params["m"], min_tokens_to_keep=params["mk"])
    out = hf(torch.zeros((1, 0), dtype=torch.long), torch.tensor(row[None], dtype=torch.float32))[0].double().numpy()
    oracle = lambda p: o_hf.min_p(row, p["m"], p["mk"])  # noqa: E731
    tied = check_kept("MinPLogitsWarper", "float32", out, row, oracle, {"m": -1}, params, 1e-6, on_probabilities=True)
    assert tied.why is None
    if not np.array_equal(np.flatnonzero(np.isfinite(out)), np.flatnonzero(np.isfinite(oracle(params)))):
        untied = check_kept("MinPLogitsWarper", "float32", out, row, oracle, {"m": -1}, params, 1e-6)
        assert untied.outcome == "rejected"  # the false alarm this tie removes


@pytest.mark.parametrize("name, params", [
    ("top_k", {"k": 5}), ("top_k", {"k": 20}), ("top_p", {"p": 0.5, "min_keep": 0}),
    ("top_p", {"p": 0.9, "min_keep": 3}), ("min_p", {"p": 0.3, "min_keep": 4}), ("min_p", {"p": 0.99, "min_keep": 6}),
    ("mirostat_v2", {"seed": 3, "tau": 0.2, "eta": 0.1}), ("mirostat", {"seed": 3, "tau": 0.2, "eta": 0.1, "m": 100}),
])
def test_real_llama_cpp_answers_relabelled_inside_ties_stay_legal(name, params):
    """The peers' judge, same rule: real llama.cpp's answer with the ids of equal input logits
    exchanged (another unstable sort's order; an unsorted answer stays in input order) is still
    legal, and is judged exactly as before."""
    from properties.peers.legality import PeerOutput, check
    from properties.peers.llama_cpp import adapter
    from properties.peers.llama_cpp.legal import Drift, legal_for
    from properties.peers.llama_cpp.streams import raw_state

    if adapter.available():
        pytest.skip(f"llama.cpp not loadable: {adapter.available()}")
    record = record_named(name)
    rng, relabelled = np.random.default_rng(5), 0
    for x in _rows(48)[:5]:
        x32 = x.astype(np.float32)
        with record.llama.peer(params, x32.size) as q:
            out = q.apply(raw_state(x32))
        verdict = check(legal_for(record.build(params, x32.size), raw_state(x32), Drift()), raw_state(x32), out)
        assert verdict.ok, f"llama.cpp {name}{params}: {verdict.why}"
        perm = ties.relabel(ties.logit_classes(x32.astype(np.float64)), rng)
        at = np.arange(out.ids.size) if out.sorted else np.argsort(perm[out.ids])  # input order stays input order
        moved = PeerOutput(perm[out.ids][at], out.logits[at], out.p[at], out.selected, out.sorted)
        relabelled += int((moved.ids != out.ids).any())
        again = check(legal_for(record.build(params, x32.size), raw_state(x32), Drift()), raw_state(x32), moved)
        assert again.ok == verdict.ok, f"relabelled inside ties: {again.why}"
    # a threshold on logits keeps whole classes: there only a min_keep restore splits one
    assert relabelled or (name == "min_p" and params["min_keep"] < 6), "no answer had tied tokens to exchange"


def test_top_k_monotone_with_233_tokens_at_the_kth_logit():
    """The real-llama.cpp false alarm, pinned: 233 tokens share the k-th logit, and the call at
    k = 20 keeps the highest tied ids, the call at k = 60 the lowest (each a legal top-k set, as
    an unstable partial sort may choose). Nested modulo ties: passes; token by token it is not."""
    row = np.full(400, -2.0, dtype=np.float32)
    row[:233] = 1.0
    row[300:310] = 3.0
    x = np.random.default_rng(0).permutation(row)[None, :]

    def top_k(logits, k):  # gpu_impl on the reversed row keeps the highest tied ids
        k = np.asarray(k)
        flip = np.ascontiguousarray(np.asarray(logits)[:, ::-1])
        return np.where((k < 40)[:, None], gpu_impl.top_k(flip, k)[:, ::-1], gpu_impl.top_k(logits, k))

    engine = type("TieFlipper", (), {"top_k": staticmethod(top_k), "softmax": staticmethod(gpu_impl.softmax),
                                     "__name__": "tie_flipper"})
    record = record_named("top_k")
    small, large = top_k(x, np.array([20]))[0] > -np.inf, top_k(x, np.array([60]))[0] > -np.inf
    assert not checks.nested(small, large, None)
    assert checks.nested(small, large, record.ties(x[0].astype(np.float64)))
    case = Case("ties", 400, "float32", (0,), {"k": np.array([20], dtype=np.int64)}, x)
    assert _verdict(checks.check_monotone, Impl(engine, "numpy"), record, case, np.array([60])) is None
    assert _verdict(checks.check_matches_oracle, Impl(engine, "numpy"), record, case) is None
