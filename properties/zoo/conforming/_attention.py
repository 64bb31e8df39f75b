"""Attention as flash-attention kernels compute it: keys in tiles, an online softmax (running max
and sum, both rescaled when a tile raises the max), the value accumulator rescaled alongside, one
normalisation at the end. ``tile=1`` is ggml-CPU's one-key-at-a-time loop; 64 a CUDA tile.

Input checks are gpu_impl.ops' own. Invisible keys are skipped (their scores become -inf before
the max; non-finite values are zeroed for the products and the outputs a visible one reaches are
set to NaN afterwards), as every correct kernel must: a masked cache cell may hold anything.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from gpu_impl.ops._xp import quiet, scalar
from gpu_impl.ops.attention import _inputs
from gpu_impl.ops.rope import rope as rotate
from properties.zoo.conforming._arith import F32


def _flash(q: np.ndarray, k: np.ndarray, v: np.ndarray, seen: np.ndarray, scale: float, cap: float,
           tile: int, acc: type, reciprocal: bool | Callable[[np.ndarray], np.ndarray], rescale: bool = True,
           exp: Callable[[np.ndarray], np.ndarray] = np.exp,
           tanh: Callable[[np.ndarray], np.ndarray] = np.tanh) -> np.ndarray:
    g = q.shape[1] // k.shape[1]
    kk, vv = np.repeat(k, g, axis=1).astype(acc), np.repeat(v, g, axis=1).astype(acc)
    qq = q.astype(acc)
    tq, hq, dv = q.shape[0], q.shape[1], v.shape[2]
    m = np.full((tq, hq), -np.inf, acc)
    s = np.zeros((tq, hq), acc)
    out = np.zeros((tq, hq, dv), acc)
    # zero non-finite values once (an identity on finite data, so a poisoned invisible cell
    # cannot change the arithmetic of anything it does not reach), mark what they reach at the end
    bad_v = ~np.isfinite(vv)
    vv = np.where(bad_v, acc(0), vv)
    for lo in range(0, k.shape[0], tile):
        vis = seen[:, lo:lo + tile]  # [Tq, t]
        sc = np.einsum("thd,jhd->thj", qq, kk[lo:lo + tile]) * acc(scale)
        if cap > 0:
            sc = acc(cap) * tanh(sc / acc(cap))
        sc = np.where(vis[:, None, :], sc, acc(-np.inf))
        m_new = np.maximum(m, sc.max(axis=-1))
        base = np.where(m_new > -np.inf, m_new, acc(0))
        alpha = np.where(m > -np.inf, exp(m - base), acc(0))
        p = np.where(sc > -np.inf, exp(sc - base[..., None]), acc(0))
        pv = np.einsum("thj,jhd->thd", p, vv[lo:lo + tile])
        s = s * alpha + p.sum(axis=-1)
        out = (out * alpha[..., None] if rescale else out) + pv
        m = m_new
    if callable(reciprocal):
        out = out * reciprocal(s)[..., None]
    else:
        out = (out * (acc(1) / s)[..., None]) if reciprocal else out / s[..., None]
    reached = np.einsum("tj,jhd->thd", seen.astype(acc), bad_v.astype(acc)) > 0  # a visible NaN/inf value
    return np.where(reached, acc(np.nan), out)


def make_attention(tile: int, acc: type = F32, reciprocal: bool | Callable[[np.ndarray], np.ndarray] = False,
                   rescale: bool = True, exp: Callable[[np.ndarray], np.ndarray] = np.exp,
                   tanh: Callable[[np.ndarray], np.ndarray] = np.tanh) -> Callable[..., np.ndarray]:
    """``reciprocal``: out·(1 / s) instead of out / s, or out·reciprocal(s) with the engine's own
    1 / s. ``rescale=False`` leaves the value accumulator unscaled when a later tile raises the
    max: the classic flash-attention slip, kept here for the near-threshold zoo."""
    def attention(q: Any, k: Any, v: Any, q_pos: Any, k_pos: Any, *, scale: float | None = None,
                  causal: bool = True, window: int = 0, softcap: float = 0.0) -> np.ndarray:
        _, q32, k32, v32, qp, kp = _inputs(q, k, v, q_pos, k_pos)
        sc = 1.0 / math.sqrt(q32.shape[2]) if scale is None else scalar(scale, "scale", above=0.0)
        if int(window) != window or window < 0:
            raise ValueError(f"window must be a non-negative integer, got {window!r}")
        cap = scalar(softcap, "softcap", at_least=0.0)
        gap = qp[:, None] - kp[None, :]
        seen = gap >= 0 if causal else np.ones(gap.shape, dtype=bool)
        if window:
            seen = seen & (np.abs(gap) < int(window))
        if not seen.any(axis=1).all():
            t = int(np.flatnonzero(~seen.any(axis=1))[0])
            raise ValueError(f"query {t} at position {int(qp[t])} sees no key (causal={causal}, window={window})")
        with quiet():
            return _flash(q32, k32, v32, seen, sc, cap, tile, acc, reciprocal, rescale, exp, tanh).astype(F32)
    return attention


def attention_functions(attention: Callable[..., np.ndarray]) -> dict[str, Callable]:
    """attention plus the cache-driven entry points, routed through this ``attention``."""
    def attention_decode(cache: Any, q: Any, q_pos: Any, **attn: Any) -> np.ndarray:
        return attention(q, cache.k, cache.v, q_pos, cache.positions, **attn)

    def attention_step(cache: Any, q: Any, k: Any, v: Any, positions: Any, *, rope: dict | None = None,
                       **attn: Any) -> np.ndarray:
        if rope is not None:
            q, k = rotate(q, positions, **rope), rotate(k, positions, **rope)
        cache.append(k, v, positions)
        return attention_decode(cache, q, positions, **attn)

    return {"attention": attention, "attention_decode": attention_decode, "attention_step": attention_step}
