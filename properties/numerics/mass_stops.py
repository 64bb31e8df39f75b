"""Where a stop on a cumulative mass known only to ± its running error may land."""
from __future__ import annotations

import numpy as np


def window_spread(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """max - min of ``values[lo[i]:hi[i]]`` for every i (non-empty windows), via a sparse table:
    O(n log n) however wide the windows are."""
    n = values.size
    levels = [np.asarray(values, dtype=np.float64)]
    maxes, mins = [levels[0]], [levels[0]]
    while (1 << len(maxes)) <= n:
        half = 1 << (len(maxes) - 1)
        maxes.append(np.maximum(maxes[-1][:-half], maxes[-1][half:]))
        mins.append(np.minimum(mins[-1][:-half], mins[-1][half:]))
    k = np.floor(np.log2(hi - lo)).astype(np.int64)
    out = np.empty(lo.size)
    for level in np.unique(k):
        i = np.flatnonzero(k == level)
        a, b = lo[i], hi[i] - (1 << level)
        out[i] = (np.maximum(maxes[level][a], maxes[level][b]) - np.minimum(mins[level][a], mins[level][b]))
    return out


def legal_stops(cum: np.ndarray, d_cum: np.ndarray, threshold: float, strict: bool,
                eligible: np.ndarray) -> tuple[int, int]:
    """Sizes a "keep through the first eligible position whose cumulative mass reaches the
    threshold" rule may produce when the running mass is only known to ±d_cum.

    Returns (smallest, largest) legal size; ``n`` stands for "the stop was never reached".
    """
    n = cum.size
    if strict:
        maybe, surely = cum + d_cum > threshold, cum - d_cum > threshold
    else:
        maybe, surely = cum + d_cum >= threshold, cum - d_cum >= threshold
    first_maybe = np.flatnonzero(maybe & eligible)
    first_surely = np.flatnonzero(surely & eligible)
    lo = int(first_maybe[0]) + 1 if first_maybe.size else n
    hi = int(first_surely[0]) + 1 if first_surely.size else n
    return lo, hi
