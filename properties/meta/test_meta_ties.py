"""Ties are judged as ties (``properties.ties``): relabelling token ids inside the tie classes of
any conforming engine's answer never changes a verdict, and relabelling across classes does.
(Every conforming member: ``properties/zoo/test_ties_relabelled.py``, with the same helpers,
``properties/meta/tie_relabelling.py``; here gpu_impl, real llama.cpp and the logprobs judge.)

Each engine answers tie-rich rows: plateaus of equal logits at a top_k /
top_p / min_p cut, tied maxima for a selector, rows whose float32 probabilities underflow to 0
with ``min_keep`` restoring among them. The answer is then relabelled by a permutation that maps
every tie class of the record onto itself, drawn afresh for every call (two calls of one test may
choose different tied tokens, as an unstable sort does), and judged again by the same property
bodies the suite runs (``checks.check_matches_oracle``, ``check_monotone``, ``check_noop``) and
by the logprobs' top-n judge. The other way: greedy has no tie freedom (the first maximum,
exactly), and a relabelling that moves a kept token to an untied dropped one is a failure.
"""
from __future__ import annotations

import numpy as np
import pytest

import gpu_impl
from properties import ties
from properties.backends import Impl
from properties.engines.logprobs_checks import exact, judge_top_n
from properties.failure import Failure
from properties.meta.tie_relabelling import (TIED, Relabelled, check_noop_relabelled, check_relabelling, tie_cases,
                                             tie_rich_rows, verdict)
from properties.samplers import checks
from properties.samplers.records import record_named
from properties.samplers.strategies import Case

@pytest.mark.parametrize("name", TIED)
def test_relabelling_gpu_impl_inside_tie_classes_never_changes_averdict(name):
    check_relabelling(gpu_impl, name)
    if record_named(name).noop:
        check_noop_relabelled(gpu_impl, name)


@pytest.mark.parametrize("name", ["top_k", "top_p", "min_p", "top_n_sigma"])
def test_relabelling_across_classes_fails(name):
    """The other way: a kept token traded for an untied dropped one is a wrong answer."""
    record = record_named(name)
    base = Impl(gpu_impl, "numpy")
    failed = 0
    for i, case in enumerate(tie_cases(name)):
        wrong = Relabelled(base, record, seed=i, across=True)
        failed += verdict(checks.check_matches_oracle, wrong, record, case) is not None
        assert wrong.moved or failed
    assert failed, f"{name}: no cross-class relabelling was caught"


def test_greedy_keeps_demanding_the_first_maximum():
    """greedy's rule is deterministic (a linear scan: the first maximum), so it has no tie
    freedom: another of the tied maxima is a failure, the first one passes."""
    record = record_named("greedy")
    assert record.ties is None
    case = tie_cases("greedy")[0]
    base = Impl(gpu_impl, "numpy")
    assert verdict(checks.check_matches_oracle, base, record, case) is None
    last_max = lambda x: (x.shape[1] - 1 - np.argmax(x[:, ::-1], axis=1)).astype(np.int64)  # noqa: E731
    wrong = Impl(type("LastMax", (), {"greedy": staticmethod(last_max), "__name__": "last_max"}), "numpy")
    assert "selection" in (verdict(checks.check_matches_oracle, wrong, record, case) or "")


def test_tie_classes_are_data():
    row = np.array([1.0, 3.0, 3.0, -np.inf, 1.0, 0.0, -300.0, -400.0])
    assert ties.logit_classes(row).tolist() == [1, 0, 0, -1, 1, 2, 3, 4]
    assert ties.prob_classes(row).tolist() == [1, 0, 0, -1, 1, 2, 3, 3]  # both below 2^-126: zeros
    assert ties.interchangeable(6, 7, ties.prob_classes(row))
    assert not ties.interchangeable(6, 7, ties.logit_classes(row))
    assert not ties.interchangeable(3, 2, ties.logit_classes(row))  # a masked token ties with nothing
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

    rows = np.stack(tie_rich_rows(40)[:4] + [np.where(np.arange(40) % 9 == 0, 1.0, -np.inf).astype(np.float32)])
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
    for x in tie_rich_rows(48)[:5]:
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
    assert verdict(checks.check_monotone, Impl(engine, "numpy"), record, case, np.array([60])) is None
    assert verdict(checks.check_matches_oracle, Impl(engine, "numpy"), record, case) is None
