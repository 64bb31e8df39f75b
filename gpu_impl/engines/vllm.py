"""vLLM v1's sampler on fixed-shape [B, V] float32 rows: penalties -> temperature -> min_p ->
top_k/top_p (one ascending sort, ties kept) -> the exponential race argmax(p / q)."""
from __future__ import annotations

from typing import Any

from gpu_impl._array import (NEG_INF, above_zero, as_logits, drop, on_rows, param_xp, quiet, require_candidates,
                             row_param, scaled_rows, unit_param)
from gpu_impl._order import nth_largest
from gpu_impl.engines._common import history_counts
from gpu_impl.engines.transformers import _top_p_rows
from gpu_impl.softmax import row_softmax

SAMPLING_EPS = 1e-5


def vllm_penalties(logits: Any, prompt: Any, output: Any, repetition: Any, frequency: Any, presence: Any) -> Any:
    """Repetition over prompt + output (l > 0 ? l/r : l·r), then frequency·count and presence
    subtracted with counts over the output only."""
    xp, x, _ = as_logits(logits)
    B, V = x.shape
    r = row_param(repetition, B, "repetition", xp)
    if bool((r <= 0).any()):
        raise ValueError(f"parameter repetition must be > 0, got {r.tolist()}")
    f = row_param(frequency, B, "frequency", xp)
    pr = row_param(presence, B, "presence", xp)
    out_c = history_counts(xp, output, B, V)
    seen = (history_counts(xp, prompt, B, V) + out_c) > 0
    y = xp.where(seen, xp.where(x > 0, x / r[:, None], x * r[:, None]), x)
    c = out_c.astype(xp.float32)
    return y - (c * f[:, None] + (c > 0) * pr[:, None])


def vllm_min_p(logits: Any, p: Any) -> Any:
    xp, x, row_max = as_logits(logits)
    px = param_xp(xp, p)
    p = row_param(p, x.shape[0], "p", px)
    probs = row_softmax(xp, x, row_max)
    # decided and multiplied in float64: CuPy's float32 kernels flush a subnormal p (or p·p_max) to 0
    return on_rows(xp, x, above_zero(px, p), lambda sub, sel: drop(
        xp, sub, probs[sel] < scaled_rows(xp, xp.asarray(p)[sel], probs[sel].max(axis=1))))


def vllm_top_k_top_p(logits: Any, k: Any, p: Any) -> Any:
    """top_k (k <= 0 or k >= V: off) drops l < the k-th largest; top_p then drops the ascending
    prefix of the survivors' softmax with cumulative mass <= 1 - p, the largest always kept."""
    xp, x, _ = as_logits(logits)
    B, V = x.shape
    k = row_param(k, B, "k", xp, integer=True)
    p = row_param(p, B, "p", xp, dtype=xp.float64)
    x = on_rows(xp, x, (k > 0) & (k < V),
                lambda sub, sel: drop(xp, sub, sub < nth_largest(xp, sub, k[sel])[:, None]))
    row_max = x.max(axis=1)
    ones = xp.ones(B, dtype=xp.int64)
    return on_rows(xp, x, p < 1, lambda sub, sel: _top_p_rows(xp, sub, row_max[sel], p[sel], ones[sel]))


def vllm_chain(logits: Any, prompt: Any, output: Any, repetition: Any, frequency: Any, presence: Any,
               t: Any, min_p: Any, top_k: Any, top_p: Any) -> Any:
    """The logits the race runs on; rows with t < 1e-5 keep only their first maximal logit."""
    xp, x, _ = as_logits(logits)
    B, V = x.shape
    t = row_param(t, B, "t", xp, dtype=xp.float64)
    x = vllm_penalties(x, prompt, output, repetition, frequency, presence)
    greedy = t < SAMPLING_EPS
    with quiet():
        y = x / xp.where(greedy, 1.0, t).astype(xp.float32)[:, None]
    y = vllm_top_k_top_p(vllm_min_p(y, min_p), top_k, top_p)
    if bool(greedy.any()):
        first = xp.argmax(x, axis=1)
        only = xp.where(xp.arange(V)[None, :] == first[:, None], x, NEG_INF)
        y = xp.where(greedy[:, None], only, y)
    return y


def vllm_sample(logits: Any, u: Any) -> Any:
    """argmax(softmax(logits) / q), q = -log(1 - u) ~ Exp(1) from uniforms u [B, V] (float64)."""
    xp, x, row_max = as_logits(logits)
    require_candidates(xp, row_max, "vllm_sample")
    B, V = x.shape
    uu = xp.asarray(u, dtype=xp.float64)
    if uu.shape != (B, V):
        raise ValueError(f"u has shape {tuple(uu.shape)}, the race needs one uniform per token {(B, V)}")
    unit_param(uu.ravel(), B * V, "u", xp)
    probs = row_softmax(xp, x, row_max).astype(xp.float64)
    q = -xp.log1p(-uu)
    with quiet():
        score = xp.where(probs > 0, probs / q, -1.0)
    return xp.argmax(score, axis=1).astype(xp.int64)
