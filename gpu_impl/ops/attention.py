"""Attention over explicit positions: grouped heads without repeating K/V, a visibility mask
built from positions, masked entries removed with ``where`` (never added as -inf to a score
that may be NaN), and a slow path only when some input is non-finite.

Decisions as in the oracle (see gpu_impl.ops): invisible entries never matter; a non-finite
q row or visible k row → that output row NaN; a non-finite visible v entry → its output column
NaN; a query with no visible key, bad head counts, shapes, positions, window, softcap or scale
→ ValueError.
"""
from __future__ import annotations

import math
from typing import Any

from gpu_impl.ops._xp import array_module, f32, ints, ndim, quiet, scalar


def _inputs(q: Any, k: Any, v: Any, q_pos: Any, k_pos: Any):
    xp = array_module(q, k, v)
    q, k, v = f32(xp, q, "q"), f32(xp, k, "k"), f32(xp, v, "v")
    for arr, name in ((q, "q"), (k, "k"), (v, "v")):
        ndim(arr, 3, name)
    if q.shape[2] != k.shape[2]:
        raise ValueError(f"q and k head dims differ: {q.shape[2]} vs {k.shape[2]}")
    if v.shape[:2] != k.shape[:2]:
        raise ValueError(f"v has shape {tuple(v.shape)} but k has {tuple(k.shape)}: tokens and heads must match")
    if k.shape[1] == 0 or q.shape[1] % k.shape[1]:
        raise ValueError(f"n_head={q.shape[1]} is not divisible by n_kv_head={k.shape[1]}")
    qp, kp = ints(xp, q_pos, "q_pos", 1), ints(xp, k_pos, "k_pos", 1)
    if qp.shape[0] != q.shape[0] or kp.shape[0] != k.shape[0]:
        raise ValueError(f"positions have {qp.shape[0]} and {kp.shape[0]} entries for {q.shape[0]} queries "
                         f"and {k.shape[0]} keys")
    if bool((qp < 0).any()) or bool((kp < 0).any()):
        raise ValueError("positions must be >= 0")
    return xp, q, k, v, qp, kp


def attention(q: Any, k: Any, v: Any, q_pos: Any, k_pos: Any, *, scale: float | None = None,
              causal: bool = True, window: int = 0, softcap: float = 0.0) -> Any:
    xp, q, k, v, qp, kp = _inputs(q, k, v, q_pos, k_pos)
    sc = 1.0 / math.sqrt(q.shape[2]) if scale is None else scalar(scale, "scale", above=0.0)
    if int(window) != window or window < 0:
        raise ValueError(f"window must be a non-negative integer, got {window!r}")
    cap = scalar(softcap, "softcap", at_least=0.0)
    gap = qp[:, None] - kp[None, :]  # [Tq, Tk]
    seen = gap >= 0 if causal else xp.ones(gap.shape, dtype=bool)
    if window:
        seen = seen & (xp.abs(gap) < int(window))
    blind = ~seen.any(axis=1)
    if bool(blind.any()):
        t = int(xp.nonzero(blind)[0][0])
        raise ValueError(f"query {t} at position {int(qp[t])} sees no key (causal={causal}, window={window})")
    finite = bool(xp.isfinite(q).all()) and bool(xp.isfinite(k).all()) and bool(xp.isfinite(v).all())
    if finite:
        return _core(xp, q, k, v, seen, sc, cap)
    return _guarded(xp, q, k, v, seen, sc, cap)


def _core(xp, q: Any, k: Any, v: Any, seen: Any, scale: float, cap: float) -> Any:
    """Finite inputs: [Tq, Hq, Dk] x [Tk, Hkv, Dk] -> [Tq, Hq, Dv] with query heads grouped per K/V head."""
    n_q, n_head, dk = q.shape
    n_kv, n_kv_head, dv = v.shape
    g = n_head // n_kv_head
    qg = q.reshape(n_q, n_kv_head, g, dk).transpose(1, 2, 0, 3)  # [Hkv, g, Tq, Dk]
    kt = k.transpose(1, 2, 0)[:, None]  # [Hkv, 1, Dk, Tk]
    s = xp.matmul(qg, kt) * xp.float32(scale)  # [Hkv, g, Tq, Tk]
    if cap > 0:
        c = xp.float32(cap)
        s = c * xp.tanh(s / c)
    s = xp.where(seen, s, xp.float32(-xp.inf))
    with quiet():
        e = xp.exp(s - s.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    out = xp.matmul(p, v.transpose(1, 0, 2)[:, None])  # [Hkv, g, Tq, Dv]
    return out.transpose(2, 0, 1, 3).reshape(n_q, n_head, dv)


def _guarded(xp, q: Any, k: Any, v: Any, seen: Any, scale: float, cap: float) -> Any:
    """Non-finite inputs: compute on zeroed copies, then mark exactly the outputs that a
    visible non-finite entry reaches."""
    fq, fk, fv = xp.isfinite(q), xp.isfinite(k), xp.isfinite(v)
    zero = xp.float32(0)
    out = _core(xp, xp.where(fq, q, zero), xp.where(fk, k, zero), xp.where(fv, v, zero), seen, scale, cap)
    n_q, n_head, _ = q.shape
    g = n_head // k.shape[1]
    vis = seen.astype(xp.float32)
    bad_k = (~fk.all(axis=2)).astype(xp.float32)  # [Tk, Hkv]
    row = (vis @ bad_k > 0).repeat(g, axis=1) | ~fq.all(axis=2)  # [Tq, Hq]
    bad_v = (~fv).astype(xp.float32).transpose(1, 0, 2)  # [Hkv, Tk, Dv]
    col = (xp.matmul(vis[None], bad_v) > 0).repeat(g, axis=0).transpose(1, 0, 2)  # [Tq, Hq, Dv]
    return xp.where(row[..., None] | col, xp.float32(xp.nan), out)


def attention_decode(cache: Any, q: Any, q_pos: Any, **attn: Any) -> Any:
    """Attend from q over everything ``cache`` holds (no append)."""
    return attention(q, cache.k, cache.v, q_pos, cache.positions, **attn)


def attention_step(cache: Any, q: Any, k: Any, v: Any, positions: Any, *, rope: dict | None = None,
                   **attn: Any) -> Any:
    """One engine step: RoPE on q and k at ``positions``, append k/v, attend over the cache."""
    from gpu_impl.ops.rope import rope as rotate

    if rope is not None:
        q, k = rotate(q, positions, **rope), rotate(k, positions, **rope)
    cache.append(k, v, positions)
    return attention_decode(cache, q, positions, **attn)
