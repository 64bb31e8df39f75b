"""Speculative cases: a target ``p`` [K+1, V] (before its own top-k and top-p), a draft ``q``
[K, V], the target's top_k and top_p. Rows are built from a few supported tokens (so a
151,936-token row costs nothing to describe), placed at tile edges (0, 1,023, 1,024, 8,191,
8,192, V-1) as often as anywhere.

Families: ``sparse`` (p on 1-6 tokens, q on 1-4, integer weights: ties and p = 0 / q = 0 tokens
come naturally), ``tie_cut`` (a tie at the target's top-k cut, the draft proposing the tied
tokens the oracle's cut drops: an engine may keep any of them, as many as the cut says: [0.4, 0.3, 0.3, 0] with k = 2), ``tie_top_p`` (the same tie at the
top-p cut: p halfway across the first tied token's mass, [0.4, 0.3, 0.3, 0] with top_p = 0.55),
``dense`` (p on most of the vocabulary, a few zeros, q sparse), ``tail`` (p's mass in the last
tokens, the last partial 1,024-wide tile, q elsewhere: the residual lives at the vocabulary's
end). Every family but ``tie_top_p`` draws top_p from a few settings, off three times in eight,
or exactly at a cumulative mass of row 0 (where the fp32 cut may legally go either way); every
family but the two tie families draws top_k (off three times in seven), so top-k then top-p is
exercised.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

EXACT_VOCABS = (2, 3, 4, 7, 64, 1023, 1024, 1025, 8193)
"""The exactness grid's vocabularies (one call is n_a·n_r rows of V)."""
LARGE_VOCABS = (8193, 151936)
FAMILIES = ("sparse", "tie_cut", "tie_top_p", "dense", "tail")
TOP_P = (1.0, 1.0, 1.0, 0.95, 0.9, 0.8, 0.5, "at_mass")
"""top_p settings (float32 values); "at_mass": row 0's cumulative mass through a drawn prefix."""
TOP_K = (0, 0, 0, 1, 2, 3, 5)
"""top_k settings of the families without a tie at a top-k cut (0: off)."""
MAX_DRAFT_SUPPORT = 4
"""q's support in the exactness grid: one grid of n_a·n_r rows per possible draft token."""


@dataclass
class SpecCase:
    family: str
    p: np.ndarray          # float32 [K+1, V], the target before its own top-k
    q: np.ndarray          # float32 [K, V]
    top_k: int             # the target's own top-k (0: off)
    seed: int              # the uniforms' and drafts' stream
    top_p: float = 1.0     # the target's own top-p after its top-k (>= 1: off), a float32 value

    @property
    def vocab(self) -> int:
        return self.p.shape[1]

    @property
    def k(self) -> int:
        return self.q.shape[0]

    def __repr__(self) -> str:
        sup = lambda row: {int(j): float(row[j]) for j in np.flatnonzero(row)[:12]}  # noqa: E731
        return (f"SpecCase({self.family}, V={self.vocab}, K={self.k}, top_k={self.top_k}, top_p={self.top_p!r}, "
                f"seed={self.seed}, "
                f"p0={sup(self.p[0])}{'…' if np.count_nonzero(self.p[0]) > 12 else ''}, q0={sup(self.q[0])})")


def _edges(v: int) -> list[int]:
    return sorted({j for j in (0, 1, 1022, 1023, 1024, 1025, 8191, 8192, v - 2, v - 1) if 0 <= j < v})


def _support(v: int, lo: int, hi: int) -> st.SearchStrategy[list[int]]:
    return st.lists(st.one_of(st.sampled_from(_edges(v)), st.integers(0, v - 1)),
                    min_size=min(lo, v), max_size=min(hi, v), unique=True)


def _row(v: int, idx: list[int], weights: list[int]) -> np.ndarray:
    row = np.zeros(v, np.float64)
    row[idx] = weights
    return (row / row.sum()).astype(np.float32)


@st.composite
def _sparse_row(draw, v: int, lo: int, hi: int) -> np.ndarray:
    idx = draw(_support(v, lo, hi))
    return _row(v, idx, draw(st.lists(st.integers(1, 8), min_size=len(idx), max_size=len(idx))))


@st.composite
def _tie_row(draw, v: int) -> tuple[np.ndarray, int, list[int]]:
    """A row with a tie at its top-k cut: k - 1 larger tokens, then >= 2 tokens tied at the k-th
    value; returns (row, k, the tied tokens the cut drops)."""
    v = max(v, 3)
    k = draw(st.integers(1, min(3, v - 2)))
    ties = draw(st.integers(2, min(4, v - k + 1)))
    idx = draw(_support(v, k - 1 + ties, k - 1 + ties + 2))
    w = [draw(st.integers(4, 8)) for _ in range(k - 1)] + [3] * ties + [draw(st.integers(1, 2)) for _ in idx[k - 1 + ties:]]
    tied = sorted(idx[k - 1:k - 1 + ties])
    return _row(v, idx, w), k, tied[1:]  # the oracle keeps the lowest id of the tie, drops the rest


@st.composite
def _tie_p_weights(draw, v: int) -> tuple[list[int], int, float]:
    """Integer weights with a tie at the top-p cut (``big`` larger tokens, then >= 2 tied, then
    smaller), and top_p halfway across the first tied token's mass (float32): the cut is one
    tied token in, with a margin of half a token's mass against any rounding."""
    v = max(v, 3)
    big = draw(st.integers(0, min(2, v - 2)))
    ties = draw(st.integers(2, min(4, v - big)))
    small = draw(st.integers(0, max(0, min(2, v - big - ties))))
    w = [draw(st.integers(4, 8)) for _ in range(big)] + [3] * ties + [draw(st.integers(1, 2)) for _ in range(small)]
    before = sum(w[:big])
    return w, big + ties, float(np.float32((before + 1.5) / sum(w)))


def _at_mass(row: np.ndarray, m: int) -> float:
    """The exact cumulative mass (float32) of the first m tokens of the row's descending order."""
    live = np.sort(row[row > 0].astype(np.float64))[::-1]
    return float(np.float32(live[:max(1, min(m, live.size))].sum() / live.sum()))


@st.composite
def spec_cases(draw, vocabs: tuple[int, ...] = EXACT_VOCABS, max_k: int = 1, families: tuple[str, ...] = FAMILIES,
               draft_support: int = MAX_DRAFT_SUPPORT) -> SpecCase:
    v = draw(st.sampled_from(vocabs))
    k = draw(st.integers(1, max_k))
    family = draw(st.sampled_from(families))
    if v < {"tie_cut": 3, "dense": 8, "tail": 8}.get(family, 0):
        family = "sparse"
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    top_k = 0
    top_p: float | str = 1.0
    ps, qs = [], []
    tie_p = draw(_tie_p_weights(v)) if family == "tie_top_p" and v >= 3 else None
    for i in range(k + 1):
        if tie_p is not None:
            w, n_tied, top_p = tie_p
            idx = draw(_support(v, len(w), len(w)))
            row = _row(v, idx, w)
            # the draft never applied the target's cut: it proposes a tied token the cut drops
            big = n_tied - w.count(3)
            out = sorted(idx[big:n_tied])[1]  # the lowest tied id is kept, the next dropped
            rest = [(j, wj) for j, wj in zip(idx, w) if j != out][:draft_support - 1]
            qrow = _row(v, [out] + [j for j, _ in rest], [3] + [wj for _, wj in rest]) if i < k else None
        elif family == "tie_cut" and v >= 3:
            row, top_k_i, dropped = draw(_tie_row(v))
            if i == 0:
                top_k = top_k_i
            # the draft never applied the target's cut: it proposes the dropped tied tokens too
            qrow = row.copy() if i < k else None
            if qrow is not None and np.count_nonzero(qrow) > draft_support:
                keep = dropped[:1] + [j for j in np.flatnonzero(qrow) if j not in dropped[:1]][:draft_support - 1]
                qrow = _row(v, keep, [float(qrow[j]) for j in keep])
        elif family == "dense" and v >= 8:
            row = rng.random(v) * (rng.random(v) < 0.9)
            row[rng.integers(v)] += 1.0
            row = (row / row.sum()).astype(np.float32)
            qrow = draw(_sparse_row(v, 1, draft_support)) if i < k else None
        elif family == "tail" and v >= 8:
            last_tile = (v // 1024) * 1024 if v % 1024 else v - min(v, 4)
            tail = sorted({v - 1, max(last_tile, 0), *draw(st.lists(st.integers(max(v - 8, 0), v - 1), max_size=3))})
            body = draw(st.lists(st.integers(0, max(v - 9, 0)), min_size=1, max_size=3, unique=True))
            idx = sorted(set(tail) | set(body))
            row = _row(v, idx, [draw(st.integers(2, 8)) if j in tail else 1 for j in idx])
            qrow = _row(v, body[:draft_support], [1] * len(body[:draft_support])) if i < k else None
        else:
            row = draw(_sparse_row(v, 1, 6))
            qrow = draw(_sparse_row(v, 1, draft_support)) if i < k else None
        ps.append(row)
        if qrow is not None:
            qs.append(qrow)
    if family not in ("tie_cut", "tie_top_p"):  # the tie families keep their one cut
        top_k = draw(st.sampled_from(TOP_K))
    if tie_p is None:
        top_p = draw(st.sampled_from(TOP_P))
        if top_p == "at_mass":
            top_p = _at_mass(ps[0], draw(st.integers(1, 4)))
        top_p = float(np.float32(top_p))
    return SpecCase(family, np.stack(ps), np.stack(qs), top_k, seed, float(top_p))


def corners() -> tuple[SpecCase, ...]:
    """Examples every run visits first (K = 1): the boundary-tie shape [0.4, 0.3, 0.3, 0] with
    k = 2, then with top_p = 0.55 (two tokens kept, the tied third dropped), and with top_p = 0.7
    (the mass of two tokens exactly: a cut the fp32 mass may legally put after either), each with
    a draft that ignores the cut; top-k 3 then top-p 0.75 on [0.1, 0.35, 0.05, 0.3, 0.2] (two
    tokens kept, renormalised: top-p before top-k would keep three) with a draft on the dropped
    tokens too; a 8,193-token row whose mass sits in the last partial 1,024-wide
    tile (token 8,192) with the draft elsewhere."""
    tie = np.array([[0.4, 0.3, 0.3, 0.0], [0.25, 0.25, 0.25, 0.25]], np.float32)
    chain_p = np.array([[0.1, 0.35, 0.05, 0.3, 0.2], [0.2] * 5], np.float32)
    chain_q = np.array([[0.5, 0.3, 0.2, 0.0, 0.0]], np.float32)
    tail_p = np.zeros((2, 8193), np.float32)
    tail_p[:, [5, 8191, 8192]] = np.float32([0.2, 0.3, 0.5])
    tail_q = np.zeros((1, 8193), np.float32)
    tail_q[0, [5, 8191]] = np.float32([0.5, 0.5])
    return (SpecCase("tie_cut", tie, tie[:1].copy(), 2, 0), SpecCase("tie_top_p", tie, tie[:1].copy(), 0, 0, float(np.float32(0.55))),
            SpecCase("tie_top_p", tie, tie[:1].copy(), 0, 0, float(np.float32(0.7))),
            SpecCase("sparse", chain_p, chain_q, 3, 2, float(np.float32(0.75))), SpecCase("tail", tail_p, tail_q, 0, 1))
