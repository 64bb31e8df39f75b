"""Relabelling an engine's answers inside tie classes (``properties.ties``), for the tests that
check a verdict never changes under it: ``properties/meta/test_meta_ties.py`` (gpu_impl, the real
llama.cpp, the logprobs judge) and ``properties/zoo/test_ties_relabelled.py`` (every conforming
member).

``Relabelled`` wraps an engine: every answer of the record's function is relabelled by a
permutation that maps each tie class of the record onto itself, one per (row, parameters), so two
calls with other parameters choose other tied tokens, as an unstable sort may, while a row asked
twice alike answers alike. ``check_relabelling`` runs the suite's own property bodies on the plain
and the relabelled engine over tie-rich rows and says what differs.
"""
from __future__ import annotations

import zlib
from types import ModuleType

import numpy as np

from properties import ties
from properties.backends import Impl
from properties.failure import Failure
from properties.samplers import checks
from properties.samplers.records import record_named
from properties.samplers.strategies import Case, make_logits

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


def verdict(body, *args) -> str | None:
    try:
        body(*args)
    except Failure as exc:
        return f"{exc.property}: {exc.why}"
    return None


def tie_rich_rows(vocab: int = 48) -> list[np.ndarray]:
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


def tie_cases(name: str) -> list[Case]:
    rows = np.stack(tie_rich_rows()).astype(np.float32)
    return [Case("ties", rows.shape[1], "float32", tuple(range(rows.shape[0])), p, rows)
            for p in _params(name, rows.shape[0], rows.shape[1])]


def check_relabelling(module: ModuleType, name: str) -> None:
    """The engine passes impl ≡ oracle (and monotonicity) on the tie-rich cases, and its answers
    relabelled inside tie classes get the same verdicts; some answer had a tied token to move."""
    record = record_named(name)
    base = Impl(module, "numpy")
    engine = module.__name__
    moved = 0
    for i, case in enumerate(tie_cases(name)):
        plain = verdict(checks.check_matches_oracle, base, record, case)
        assert plain is None, f"{engine} (a conforming engine) fails {name} on {case}: {plain}"
        relabelled = Relabelled(base, record, seed=i)
        got = verdict(checks.check_matches_oracle, relabelled, record, case)
        assert got == plain, f"{engine}'s {name} answer relabelled inside its tie classes: {got}"
        if record.monotone:
            param = record.monotone[0][0]
            other = case.params[param] + 7 if name == "top_k" else case.params[param] * (0.5 if name == "min_p" else 2)
            for impl in (base, Relabelled(base, record, seed=100 + i)):
                assert verdict(checks.check_monotone, impl, record, case, other) is None, (engine, name, case)
        moved += relabelled.moved
    assert moved, f"no answer of {engine}'s {name} had a tied token to relabel: the rows test nothing"


def check_noop_relabelled(module: ModuleType, name: str) -> None:
    """A no-op answer relabelled inside ties stays a no-op: a probability filter may drop the
    tokens whose float32 probability is 0 (TopPLogitsWarper(1.0) does), nothing else moves."""
    record = record_named(name)
    base = Impl(module, "numpy")
    for case in tie_cases(name)[:1]:
        for noop in record.noop:
            assert verdict(checks.check_noop, base, record, case, noop) is None, (module.__name__, noop)
            assert verdict(checks.check_noop, Relabelled(base, record, 7), record, case, noop) is None
