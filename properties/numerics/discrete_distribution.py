"""libstdc++'s ``discrete_distribution``: its pick, and every pick weights within a tolerance allow."""
from __future__ import annotations

import numpy as np

from .units import U32


def discrete_select(weights: np.ndarray, u: float) -> int:
    """libstdc++ ``discrete_distribution<int>`` over the weights with the draw ``u``: weights to
    double, sequential sum, normalise, sequential partial sums with the last forced to 1,
    ``lower_bound``. Fewer than two weights give 0 (and consume no draw)."""
    w = np.asarray(weights).astype(np.float64)
    if w.size < 2:
        return 0
    total = np.cumsum(w)[-1]
    cp = np.cumsum(w / total)
    cp[-1] = 1.0
    return int(np.searchsorted(cp, u, side="left"))


def discrete_reachable(weights: np.ndarray, tol: np.ndarray, u: float) -> np.ndarray:
    """Indexes ``discrete_select`` can give with the draw ``u`` for any weights within ``tol`` of
    ``weights`` (each partial sum of the normalised weights moves by at most its running error)."""
    w, dw = np.asarray(weights, np.float64), np.asarray(tol, np.float64)
    if w.size < 2:
        return np.zeros(min(w.size, 1), dtype=np.int64)
    total = w.sum()
    cp = np.cumsum(w) / total
    err = (np.cumsum(dw) + cp * dw.sum()) / total + 4 * U32 * cp
    cp[-1], err[-1] = 1.0, 0.0
    below = np.concatenate(([-np.inf], cp[:-1] - err[:-1]))
    return np.flatnonzero((below < u) & (cp + err >= u))
