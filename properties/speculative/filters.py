"""The target's own filter chain as the judge sees it: every float64 filtered target an fp32
engine may legally reach at one position (``legal_rows``), and the renormalisation's error (``eps_p``).

Top-k keeps exactly k tokens (lowest ids among ties at the k-th value): a selection on the
float32 values as given, with no rounding to decide. Top-p compares a float32 cumulative mass
with p: where the exact mass at the cut lies within the mass window of p, the fp32 decision may
legally go either way, so the kept count may be any count the oracle gives for a p' within the
window (``top_p_window``); every legal kept set is still a prefix of the (probability
descending, token id ascending) order, so a token tied with the crossing one but later in that
order is never legal while the earlier one is cut off.

The window (derived, not tuned): the row top-p sees is the top-k output, a float32 softmax-like
renormalisation of the given values, so it is ``numerics.mass_bound`` on the row's logarithms
(each probability within the softmax model's relative bound: its elementwise part and the
normaliser θ, then the prefix sum of k + 1 terms in any order the contract accepts: an engine
that computes the softmax itself from logits does no better), plus u·p for the threshold's
product p·S on an unnormalised row. As in the samplers' windows, it is taken at the crossing
and again where p + window moves the crossing.
"""
from __future__ import annotations

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


def legal_rows(row: np.ndarray, top_k: int, top_p: float) -> Iterator[np.ndarray]:
    """The filtered rows one position may legally have, lazily: the oracle's first, then the other
    legal kept counts nearest the oracle's count first. Lazy because the window can hold a thousand
    counts (a dense row of 151,936 tokens at p = 0.5: 1,044), and a caller stops at the first row
    that holds its output; a count that only adds a zero-probability token is the row of the count
    before it and is not repeated."""
    base = spec.target_top_k(np.asarray(row, np.float64), top_k)
    want = spec.target_top_p(base, top_p)
    yield want
    if top_p >= 1:
        return
    order = np.lexsort((np.arange(base.size), -base))
    live = base[order] > 0
    k = spec.top_p_kept(base, top_p)
    for n in sorted(kept_counts(base, top_p), key=lambda n: (abs(n - k), n)):
        if n < 1 or (n > 1 and not live[n - 1]):
            continue
        kept = np.zeros_like(base)
        kept[order[:n]] = base[order[:n]]
        kept /= kept.sum()
        if not np.array_equal(kept, want):
            yield kept


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
