"""Correct float32 dists written the way real engines write them, shared by the one-CDF judge's
test (``test_cdf_shape.py``) and dist's contract test (``test_dist_contract.py``): a float32
normaliser with a double CDF, and rand's ``WeightedIndex<f32>`` (candle, mistral.rs)."""
from __future__ import annotations

import numpy as np

F32 = np.float32


def seq_normaliser_wide_cdf(logits: np.ndarray, u: np.ndarray) -> np.ndarray:
    """p = expf(d) / S with S a sequential float32 sum (η up to γ_V), the CDF of p in double."""
    x = np.asarray(logits, F32)
    e = np.exp(x - x.max(axis=1, keepdims=True)).astype(F32)
    s = np.cumsum(e, axis=1, dtype=F32)[:, -1:]
    cdf = np.cumsum((e / s).astype(F32), axis=1, dtype=np.float64)
    hit = cdf >= np.asarray(u)[:, None]
    return np.where(hit.any(axis=1), np.argmax(hit, axis=1), x.shape[1] - 1)


def weighted_index_f32(logits: np.ndarray, u: np.ndarray) -> np.ndarray:
    """rand's ``WeightedIndex<f32>`` over expf weights, as candle and mistral.rs sample: cumulative
    weights summed in float32 in token order, a float32 point u·total, the first cumulative
    weight above it (a zero weight adds nothing, so it is never chosen)."""
    x = np.asarray(logits, F32)
    with np.errstate(under="ignore"):
        w = np.exp(x - x.max(axis=1, keepdims=True)).astype(F32)
    cum = np.cumsum(w, axis=1, dtype=F32)
    point = (np.asarray(u, dtype=np.float64).astype(F32) * cum[:, -1]).astype(F32)
    idx = np.array([np.searchsorted(c, t, side="right") for c, t in zip(cum, point)])
    return np.minimum(idx, x.shape[1] - 1)
