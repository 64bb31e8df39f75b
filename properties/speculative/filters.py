"""The target's own filter chain as the judge sees it: every float64 filtered target an fp32
engine may legally reach at one position (``legal_rows``), and the renormalisation's error (``eps_p``).

Top-k keeps exactly k tokens: a selection on the float32 values as given, with no rounding to
decide. Top-p compares a float32 cumulative mass with p: where the exact mass at the cut lies
within the mass window of p, the fp32 decision may legally go either way, so the kept count may
be any count the oracle gives for a p' within the window (``top_p_window``). How many tokens are
kept is the filter's; which of the tokens tied at the cut value is the engine's: every token
above the n-th largest value and any m of the tokens equal to it (``kept_sets``; the oracle takes
the lowest ids, but llama.cpp's partial sort fixes no order among equals, nor does torch.topk).
Top-p after top-k is one such cut on the row itself: top-p keeps a prefix of top-k's output by
value, so its tie class at the cut is the row's, whichever tied tokens top-k chose. A legal row
always counts exactly m of the class in its normaliser; keeping the whole class is a bug.

The window (derived, not tuned): the row top-p sees is the top-k output, a float32 softmax-like
renormalisation of the given values, so it is ``numerics.mass_bound`` on the row's logarithms
(each probability within the softmax model's relative bound: its elementwise part and the
normaliser θ, then the prefix sum of k + 1 terms in any order the contract accepts: an engine
that computes the softmax itself from logits does no better), plus u·p for the threshold's
product p·S on an unnormalised row. As in the samplers' windows, it is taken at the crossing
and again where p + window moves the crossing.
"""
from __future__ import annotations

import itertools
import math
from typing import Iterator

import numpy as np

from oracle import speculative as spec
from properties.numerics import U32, gamma, mass_bound


def _logs(row: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.where(row > 0, np.log(np.where(row > 0, row, 1.0)), -np.inf)


def top_p_window(row: np.ndarray, top_p: float) -> float:
    """How far p may move before the fp32 top-p decision on ``row`` (the top-k output, float64)
    is no longer certain (0 with top-p off)."""
    if top_p >= 1:
        return 0.0
    logs = _logs(row)
    order = np.lexsort((np.arange(row.size), -row))

    def window(probe: float) -> float:
        k = spec.top_p_kept(row, probe)
        return mass_bound(logs, order, min(k + 1, row.size)) + U32 * abs(probe)

    d = window(top_p)
    return max(d, window(top_p + d))


def kept_counts(row: np.ndarray, top_p: float) -> range:
    """The kept counts an fp32 top-p may legally reach on ``row`` (the oracle's first)."""
    k = spec.top_p_kept(row, top_p)
    if top_p >= 1:
        return range(k, k + 1)
    d = top_p_window(row, top_p)
    lo, hi = spec.top_p_kept(row, top_p - d), spec.top_p_kept(row, min(top_p + d, 1.0))
    return range(k, k + 1) if lo == hi else range(lo, hi + 1)


MAX_TIE_SUBSETS = 256
"""How many choices among the tied tokens of one cut the judge tries before it says it cannot
judge the row (a ``ValueError``, never a verdict). The strategies never reach it: their largest
class is 6 tokens, 20 choices."""


def _tie_class(vals: np.ndarray, n: int) -> tuple[int, int]:
    """[lo, hi): the positions, in the descending values ``vals``, of the tokens equal to the n-th
    largest (a tie: equal values, as ``properties.ties`` defines it for the values as given)."""
    neg = -vals
    return int(np.searchsorted(neg, neg[n - 1], "left")), int(np.searchsorted(neg, neg[n - 1], "right"))


def kept_sets(order: np.ndarray, vals: np.ndarray, n: int) -> Iterator[np.ndarray]:
    """The ids an exact selection of the n largest may keep, lazily: every token above the n-th
    largest value, then m of the tokens equal to it, each choice of m once, lowest ids first (the
    oracle's). ``order``: the row's (value descending, id ascending) order; ``vals``: the row's
    values in that order."""
    lo, hi = _tie_class(vals, n)
    tied, m = order[lo:hi], n - lo
    for i, pick in enumerate(itertools.combinations(range(tied.size), m)):
        if i == MAX_TIE_SUBSETS:
            raise ValueError(f"{tied.size} tokens tied at the cut, {math.comb(tied.size, m)} ways to keep {m}: "
                             f"the judge tried {MAX_TIE_SUBSETS} and cannot judge this row exhaustively")
        yield np.concatenate([order[:lo], tied[list(pick)]])


def cut_class(row: np.ndarray, top_k: int, top_p: float) -> tuple[np.ndarray, np.ndarray, int] | None:
    """(the ids above the oracle's cut, the ids tied at it, how many of those are kept) where the
    filters leave a choice among ties (fewer kept than tied); None where they do not."""
    row = np.asarray(row, np.float64)
    n = int(np.count_nonzero(spec.target_filter(row, top_k, top_p)))
    if (top_k <= 0 or top_k >= row.size) and top_p >= 1:
        return None
    order = np.lexsort((np.arange(row.size), -row))
    vals = row[order]
    lo, hi = _tie_class(vals, n)
    return (order[:lo], order[lo:hi], n - lo) if n < hi and vals[n - 1] > 0 else None


def legal_rows(row: np.ndarray, top_k: int, top_p: float) -> Iterator[np.ndarray]:
    """The filtered rows one position may legally have, lazily: the oracle's first, then the other
    choices among the oracle's count's tied tokens, then the other legal kept counts nearest the
    oracle's count first, each with its choices among ties. Lazy because the window can hold a
    thousand counts (a dense row of 151,936 tokens at p = 0.5: 1,044), and a caller stops at the
    first row that holds its output; a count that only adds a zero-probability token is the row of
    the count before it and is not repeated."""
    row = np.asarray(row, np.float64)
    want = spec.target_filter(row, top_k, top_p)
    yield want
    if (top_k <= 0 or top_k >= row.size) and top_p >= 1:
        return  # no cut: the row as given
    base = spec.target_top_k(row, top_k)
    order = np.lexsort((np.arange(row.size), -row))
    vals = row[order]
    k = int(np.count_nonzero(want))
    counts = sorted(kept_counts(base, top_p), key=lambda n: (abs(n - k), n)) if top_p < 1 else [k]
    for n in counts:
        if n < 1 or (n > 1 and not vals[n - 1] > 0):
            continue
        for kept in kept_sets(order, vals, n):
            out = np.zeros_like(row)
            out[kept] = row[kept]
            out /= out.sum()
            if not np.array_equal(out > 0, want > 0):
                yield out


def eps_p(pf_row: np.ndarray, vocab: int, top_k: int, top_p: float) -> float:
    """Relative error of the fp32 filtered probabilities: per active filter a renormalisation
    (the division and the rounded normaliser, 2u, and the normaliser's sum, γ over the tokens it
    adds: top-k's k, top-p's kept n), summed to first order; 0 with both filters off (p is used
    as given)."""
    n = int(np.count_nonzero(pf_row))
    e = 0.0
    if 0 < top_k < vocab:
        e += 2 * U32 + gamma(max(n, top_k), U32)
    if top_p < 1:
        e += 2 * U32 + gamma(n, U32)
    return e
