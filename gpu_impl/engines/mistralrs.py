"""mistral.rs' CPU sampler on fixed-shape [B, V] rows: penalties (frequency/presence, then
repetition), softmax(l / T), then top_k, top_p (cutoff: p times the top-k mass), min_p by zeroing
probabilities, never renormalising the weights; ``WeightedIndex`` picks the first token whose cumulative weight exceeds u·total."""
from __future__ import annotations

from typing import Any

import numpy as np

from gpu_impl._array import as_logits, get_xp, quiet, row_param, unit_param
from gpu_impl._order import first_reach
from gpu_impl.engines._common import history_counts
from gpu_impl.softmax import row_softmax


def mistralrs_weights(logits: Any, history: Any, repetition: Any, frequency: Any, presence: Any,
                      t: Any, top_k: Any, top_p: Any, min_p: Any) -> Any:
    """float32 [B, V] weights handed to WeightedIndex (t <= 0: one-hot at the first max)."""
    xp, x, _ = as_logits(logits)
    B, V = x.shape
    r = row_param(repetition, B, "repetition", xp)
    if bool((r <= 0).any()):
        raise ValueError(f"parameter repetition must be > 0, got {r.tolist()}")
    f, pr = row_param(frequency, B, "frequency", xp), row_param(presence, B, "presence", xp)
    t = row_param(t, B, "t", xp)
    k = row_param(top_k, B, "top_k", xp, integer=True)
    # the thresholds in float64 for their decisions: CuPy's kernels flush float32 subnormals
    # (-ftz=true), so a top_p of 7e-45 tested as float32 there is 0 and switches top_p off
    p = row_param(top_p, B, "top_p", xp, dtype=np.float64)
    m = row_param(min_p, B, "min_p", xp, dtype=np.float64)
    c = history_counts(xp, history, B, V).astype(xp.float32)
    y = x - (c * f[:, None] + (c > 0) * pr[:, None])
    rr = r[:, None]
    y = xp.where((c > 0) & (rr != 1), xp.where(y > 0, y / rr, y * rr), y)
    greedy = t < 1e-7  # mistral.rs: a temperature below 1e-7 is greedy
    with quiet():
        probs = row_softmax(xp, y / xp.where(greedy, 1, t)[:, None], (y / xp.where(greedy, 1, t)[:, None]).max(axis=1))
    order = xp.argsort(-probs, axis=1, kind="stable")  # descending, lower id first
    srt = xp.take_along_axis(probs, order, axis=1)
    pos = xp.arange(V)[None, :]
    kk = xp.where(k > 0, xp.minimum(k, V), V)[:, None]
    zero = pos >= kk
    before = xp.cumsum(srt, axis=1) - srt  # running f32 sum before each token
    # top_p's cutoff is p times the top-k mass (mistral.rs 0.9.5 renormalises over the top-k set);
    # zeroed from the first position whose running sum before it reaches the cutoff (a prefix even
    # when the scan's float partial sums are not monotone)
    # the product in float64: a subnormal top_p times a small top-k mass would underflow to 0 in
    # float32 and zero every token (top_p = 7e-45 at k = 1 on a flat row); the first token's running
    # sum before it is 0, below any positive cutoff, so it always stays
    cutoff = p * xp.where(pos < kk, srt, xp.float32(0)).sum(axis=1).astype(xp.float64)
    zero |= ((p > 0) & (p < 1))[:, None] & (pos >= first_reach(xp, before, cutoff)[:, None]) & (pos < kk)
    zero |= ((m > 0) & (m < 1))[:, None] & ((srt[:, :1] * m.astype(xp.float32)[:, None]) >= srt)
    w_sorted = xp.where(zero, xp.float32(0), srt)
    w = xp.empty_like(w_sorted)
    w[xp.arange(B)[:, None], order] = w_sorted
    if bool(greedy.any()):
        onehot = (pos == xp.argmax(y, axis=1)[:, None]).astype(xp.float32)
        w = xp.where(greedy[:, None], onehot, w)
    return w


def mistralrs_sample(weights: Any, u: Any) -> Any:
    """First index whose cumulative weight (float64) exceeds u · total."""
    xp = get_xp(weights)
    w = xp.asarray(weights, dtype=xp.float64)
    if w.ndim != 2 or bool((w < 0).any()) or not bool(xp.isfinite(w).all()):
        raise ValueError("weights must be a finite non-negative [B, V] array")
    B = w.shape[0]
    total = w.sum(axis=1)
    if bool((total <= 0).any()):
        raise ValueError(f"rows {xp.nonzero(total <= 0)[0].tolist()} have no positive weight")
    uu = unit_param(u, B, "u", xp)
    cum = xp.cumsum(w, axis=1)
    return first_reach(xp, cum, uu * total, strict=True).clip(0, w.shape[1] - 1).astype(xp.int64)
