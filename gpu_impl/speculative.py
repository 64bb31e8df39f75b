"""Speculative decoding's verification step: the standard rejection sampler, batched, fixed shape.

``rejection_sample(target_probs, draft_probs, draft_tokens, accept_u, residual_u, top_k=0)``

* ``target_probs``: ``[B, K+1, V]`` probabilities of the target (rows 0..K-1 at the K draft
  positions, row K for the bonus token); ``draft_probs``: ``[B, K, V]``; both float32 (any float
  dtype is computed as float32). 0 means "token excluded" (a -inf logit after softmax); negative,
  NaN or infinite entries -> ``ValueError``. Rows need not be renormalised.
* ``draft_tokens``: integer ``[B, K]`` in ``[0, V)``; ``accept_u``: ``[B, K]`` and
  ``residual_u``: ``[B, K+1]`` uniforms in [0, 1] (drawn on the host, as for ``dist``).
* ``top_k``: the target's own top-k, fused (a scalar or per-row ``[B]``; <= 0 or >= V: off):
  exactly k tokens of each target row keep their probability, among tokens equal to the k-th
  largest the lowest ids, then the row is renormalised in float32.
* ``top_p``: the target's own top-p after its top-k (a scalar or per-row ``[B]``; >= 1: off):
  the float32 running sum of the row sorted descending, against ``top_p * S`` (S its last
  entry), keeps n tokens, n - 1 the number of running sums below the threshold before the
  last (the crossing token is kept, as llama.cpp's ``cum >= p``); the n kept are the first n of
  the (probability descending, token id ascending) order, so a token tied with the crossing one
  but of a higher id is dropped; then the row is renormalised in float32.

Position i accepts d_i iff ``u_i * q_i(d_i) < p_i(d_i)`` (a draft with p = 0 is never accepted;
a draft with q = 0 is accepted iff p > 0). At the first rejection the token is drawn from the
residual max(0, p_i - q_i) by inverse CDF in token order (p_i itself where the residual is all
zero), and the row stops; if all K drafts pass, the bonus token is drawn from p_K the same way.
The residual's weights are float32 differences; the running sum and the target r·S are double,
as ``dist``'s (a zero weight gets a zero-width interval: a token with p = 0 is never emitted).

Returns ``(tokens, n_emitted)``: int64 ``[B, K+1]`` (the accepted drafts, then the residual or
bonus token, then -1) and int64 ``[B]`` (accepted + 1).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from gpu_impl._array import get_xp, row_param


def _probs(xp: Any, x: Any, name: str) -> Any:
    a = xp.asarray(x)
    if a.ndim != 3 or a.dtype.kind != "f" and str(a.dtype) != "bfloat16":
        raise ValueError(f"{name} must be a 3-D float array [batch, positions, vocab], got {a.dtype} {a.shape}")
    a = a.astype(xp.float32, copy=False)
    if not bool(xp.isfinite(a).all()) or bool((a < 0).any()):
        raise ValueError(f"{name} must be finite and non-negative")
    return a


def _uniforms(xp: Any, u: Any, shape: tuple[int, int], name: str) -> Any:
    a = xp.asarray(u, dtype=xp.float64)
    if a.shape != shape or not bool(((a >= 0) & (a <= 1)).all()):
        raise ValueError(f"{name} must be {shape} uniforms in [0, 1], got shape {a.shape}")
    return a


def _keep_first(xp: Any, p: Any, kth: Any, n: Any) -> Any:
    """The first n tokens of (probability descending, id ascending) order, renormalised in
    float32; ``kth`` [B, P, 1] is the n-th largest value, ``n`` [B, P, 1] the count."""
    above = p > kth
    tie = p == kth
    keep = above | (tie & (xp.cumsum(tie, axis=2) <= n - above.sum(axis=2, keepdims=True)))
    kept = xp.where(keep, p, xp.float32(0))
    s = kept.sum(axis=2, keepdims=True, dtype=xp.float32)
    return kept / xp.where(s > 0, s, xp.float32(1))


def _top_k(xp: Any, p: Any, k: Any) -> Any:
    """Keep exactly k tokens per row (lowest ids among ties at the k-th value), renormalised."""
    B, P, V = p.shape
    active = (k > 0) & (k < V)
    if not bool(active.any()):
        return p
    kk = xp.broadcast_to(xp.clip(k, 1, V - 1)[:, None, None], (B, P, 1))
    if xp is np and bool((kk == kk.flat[0]).all()):  # one k: a selection, not a sort
        kth = -np.partition(-p, int(kk.flat[0]) - 1, axis=2)[:, :, int(kk.flat[0]) - 1:int(kk.flat[0])]
    else:
        kth = xp.take_along_axis(-xp.sort(-p, axis=2), kk - 1, axis=2)  # the k-th largest value
    return xp.where(active[:, None, None], _keep_first(xp, p, kth, kk), p)


def _top_p(xp: Any, p: Any, top_p: Any) -> Any:
    """Keep the descending prefix through the first float32 running sum >= top_p·S, renormalised."""
    active = top_p < 1
    if not bool(active.any()):
        return p
    srt = -xp.sort(-p, axis=2)  # descending values; ties are equal, so the sums need no id order
    run = xp.cumsum(srt, axis=2, dtype=xp.float32)
    thr = top_p[:, None, None] * run[:, :, -1:]
    n = 1 + (run[:, :, :-1] < thr).sum(axis=2, keepdims=True)  # running sums short of p·S, then the crossing one
    kth = xp.take_along_axis(srt, n - 1, axis=2)
    return xp.where(active[:, None, None], _keep_first(xp, p, kth, n), p)


def _filter(xp: Any, p: Any, k: Any, top_p: Any) -> Any:
    """The target's top-k then top-p. A batch that repeats one row with one setting (a stride-0
    broadcast on NumPy) is filtered once: the filter is a function of the row alone."""
    if (xp is np and p.shape[0] > 1 and p.strides[0] == 0 and bool((k == k[0]).all())
            and bool((top_p == top_p[0]).all())):
        return np.broadcast_to(_filter(xp, p[:1], k[:1], top_p[:1]), p.shape)
    return _top_p(xp, _top_k(xp, p, k), top_p)


def _draw(xp: Any, w: Any, r: Any) -> Any:
    """Per row, the first column whose double running sum of ``w`` exceeds r·S."""
    run = xp.cumsum(w, axis=1, dtype=xp.float64)
    hit = (run > (run[:, -1] * r)[:, None]) & (w > 0)
    V = w.shape[1]
    last = V - 1 - xp.argmax((w > 0)[:, ::-1], axis=1)  # r -> 1: the last live token
    return xp.where(hit.any(axis=1), xp.argmax(hit, axis=1), last).astype(xp.int64)


def rejection_sample(target_probs: Any, draft_probs: Any, draft_tokens: Any, accept_u: Any, residual_u: Any,
                     top_k: Any = 0, top_p: Any = 1.0) -> tuple[Any, Any]:
    xp = get_xp(target_probs)
    p = _probs(xp, target_probs, "target_probs")
    q = _probs(xp, draft_probs, "draft_probs")
    B, K1, V = p.shape
    K = K1 - 1
    if K < 0 or q.shape != (B, K, V):
        raise ValueError(f"draft_probs has shape {q.shape}; with target_probs {p.shape} it must be {(B, K, V)}")
    d = xp.asarray(draft_tokens)
    if d.shape != (B, K) or (d.size and (d.dtype.kind not in "iu" or bool(((d < 0) | (d >= V)).any()))):
        raise ValueError(f"draft_tokens must be integer ids in [0, {V}) of shape {(B, K)}")
    d = d.astype(xp.int64)
    a = _uniforms(xp, accept_u, (B, K), "accept_u")
    r = _uniforms(xp, residual_u, (B, K1), "residual_u")
    k = row_param(top_k, B, "top_k", xp, integer=True)
    tp = row_param(top_p, B, "top_p", xp)
    if bool((p[:, :, :].sum(axis=2) <= 0).any()):
        raise ValueError("every target row needs a token with positive probability")
    p = _filter(xp, p, k, tp)

    pd = xp.take_along_axis(p[:, :K], d[:, :, None], axis=2)[:, :, 0].astype(xp.float64)
    qd = xp.take_along_axis(q, d[:, :, None], axis=2)[:, :, 0].astype(xp.float64)
    accepted = a * qd < pd
    stop = xp.where(accepted.all(axis=1), K, xp.argmin(accepted, axis=1)).astype(xp.int64)  # first rejection

    rows = xp.arange(B)
    ps = p[rows, stop]
    qs = xp.where((stop < K)[:, None], q[rows, xp.minimum(stop, max(K - 1, 0))] if K else 0, xp.float32(0))
    w = xp.maximum(ps - qs, xp.float32(0))
    w = xp.where((w.sum(axis=1) > 0)[:, None], w, ps)  # a residual of no mass: draw from p itself
    last = _draw(xp, w, r[rows, stop])

    pos = xp.arange(K1)[None, :]
    padded = xp.concatenate([d, xp.full((B, 1), -1, dtype=xp.int64)], axis=1)
    tokens = xp.where(pos < stop[:, None], padded, xp.where(pos == stop[:, None], last[:, None], -1))
    return tokens.astype(xp.int64), (stop + 1).astype(xp.int64)
