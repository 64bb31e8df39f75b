"""Scaled dot-product attention with explicit positions, GQA, sliding window and logit softcap.

Shapes: q ``[Tq, Hq, Dk]``, k ``[Tk, Hkv, Dk]``, v ``[Tk, Hkv, Dv]``, positions one integer per
row; the result is ``[Tq, Hq, Dv]``. Query head h reads key/value head ``h // (Hq / Hkv)``
(ggml's broadcast: consecutive query heads share a K/V head).

Key j is visible to query t iff ``k_pos[j] <= q_pos[t]`` (when causal) and
``|q_pos[t] - k_pos[j]| < window`` (when window > 0; llama.cpp's standard SWA for causal use).
score = ``scale · q·k`` (scale defaults to 1/sqrt(Dk)), then ``softcap·tanh(score/softcap)``
when softcap > 0, then softmax over the visible keys, then the weighted sum of values.

Decisions (the same in gpu_impl):
- Invisible keys and values never influence an output, even when they hold NaN or inf.
- A non-finite q row or visible key row makes that (query, head) output NaN in full; a
  non-finite visible value entry makes the output entries in its column NaN.
- A query that sees no key at all is a ValueError (there is no distribution to average over).
- ValueError for: Hq not divisible by Hkv, head dims that do not match, k/v or positions of the
  wrong length, negative positions, window < 0, softcap < 0, scale <= 0 or not finite.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from oracle.ops._checks import as64, as_int, finite_scalar


def _check(q: Any, k: Any, v: Any, q_pos: Any, k_pos: Any):
    q, k, v = as64(q, "q", 3), as64(k, "k", 3), as64(v, "v", 3)
    (tq, hq, dk), (tk, hkv, dk2), (tv, hv, _) = q.shape, k.shape, v.shape
    if dk != dk2:
        raise ValueError(f"q and k head dims differ: {dk} vs {dk2}")
    if (tv, hv) != (tk, hkv):
        raise ValueError(f"v has shape {v.shape} but k has {k.shape}: tokens and heads must match")
    if hkv == 0 or hq % hkv:
        raise ValueError(f"n_head={hq} is not divisible by n_kv_head={hkv}")
    qp, kp = as_int(q_pos, "q_pos", 1), as_int(k_pos, "k_pos", 1)
    if qp.shape[0] != tq or kp.shape[0] != tk:
        raise ValueError(f"positions have {qp.shape[0]} and {kp.shape[0]} entries for {tq} queries and {tk} keys")
    if (qp < 0).any() or (kp < 0).any():
        raise ValueError("positions must be >= 0")
    return q, k, v, qp, kp


def visibility(q_pos: np.ndarray, k_pos: np.ndarray, causal: bool, window: int) -> np.ndarray:
    """[Tq, Tk] boolean: which keys each query may attend to."""
    diff = q_pos[:, None] - k_pos[None, :]
    vis = diff >= 0 if causal else np.ones(diff.shape, dtype=bool)
    if window > 0:
        vis &= np.abs(diff) < window
    return vis


def attention(q: Any, k: Any, v: Any, q_pos: Any, k_pos: Any, *, scale: float | None = None,
              causal: bool = True, window: int = 0, softcap: float = 0.0) -> np.ndarray:
    q, k, v, qp, kp = _check(q, k, v, q_pos, k_pos)
    scale = 1.0 / math.sqrt(q.shape[2]) if scale is None else finite_scalar(scale, "scale", lo=0.0, lo_open=True)
    if int(window) != window or window < 0:
        raise ValueError(f"window must be a non-negative integer, got {window!r}")
    softcap = finite_scalar(softcap, "softcap", lo=0.0)
    vis = visibility(qp, kp, causal, int(window))
    blind = np.flatnonzero(~vis.any(axis=1))
    if blind.size:
        t = int(blind[0])
        raise ValueError(f"query {t} at position {int(qp[t])} sees no key (causal={causal}, window={window})")
    group = q.shape[1] // k.shape[1]
    out = np.empty((q.shape[0], q.shape[1], v.shape[2]))
    for h in range(q.shape[1]):
        out[:, h, :] = _one_head(q[:, h], k[:, h // group], v[:, h // group], vis, scale, softcap)
    return out


def _one_head(q: np.ndarray, k: np.ndarray, v: np.ndarray, vis: np.ndarray, scale: float,
              softcap: float) -> np.ndarray:
    out = np.empty((q.shape[0], v.shape[1]))
    for t in range(q.shape[0]):
        idx = np.flatnonzero(vis[t])
        kt, vt = k[idx], v[idx]
        if not (np.isfinite(q[t]).all() and np.isfinite(kt).all()):
            out[t] = np.nan
            continue
        s = scale * (kt @ q[t])
        if softcap > 0:
            s = softcap * np.tanh(s / softcap)
        e = np.exp(s - s.max())
        p = e / e.sum()
        finite_v = np.isfinite(vt)
        out[t] = p @ np.where(finite_v, vt, 0.0)
        out[t, ~finite_v.all(axis=0)] = np.nan
    return out


class KVCache:
    """An append-only K/V store with explicit positions and a fixed capacity (cells)."""

    def __init__(self, n_kv_heads: int, head_dim: int, capacity: int, v_dim: int | None = None) -> None:
        if min(n_kv_heads, head_dim, capacity) < 1 or (v_dim is not None and v_dim < 1):
            raise ValueError("n_kv_heads, head_dim, capacity and v_dim must be >= 1")
        self.n_kv_heads, self.head_dim, self.capacity = n_kv_heads, head_dim, capacity
        self.v_dim = head_dim if v_dim is None else v_dim
        self._k: list[np.ndarray] = []
        self._v: list[np.ndarray] = []
        self._pos: list[int] = []

    def __len__(self) -> int:
        return len(self._pos)

    def append(self, k: Any, v: Any, positions: Any) -> None:
        k, v = as64(k, "k", 3).copy(), as64(v, "v", 3).copy()  # kept: the caller's arrays stay the caller's
        pos = as_int(positions, "positions", 1)
        if k.shape[1:] != (self.n_kv_heads, self.head_dim) or v.shape != (k.shape[0], self.n_kv_heads, self.v_dim):
            raise ValueError(f"k {k.shape} / v {v.shape} do not match the cache's "
                             f"[*, {self.n_kv_heads}, {self.head_dim}] / [*, {self.n_kv_heads}, {self.v_dim}]")
        if pos.shape[0] != k.shape[0]:
            raise ValueError(f"{pos.shape[0]} positions for {k.shape[0]} new entries")
        if len(self) + k.shape[0] > self.capacity:
            raise ValueError(f"KV cache full: capacity {self.capacity}, holds {len(self)}, appending {k.shape[0]}")
        if (pos < 0).any():
            raise ValueError("positions must be >= 0")
        if len(set(pos.tolist())) != pos.size or set(pos.tolist()) & set(self._pos):
            raise ValueError("a position is already held by the cache (each position is stored once)")
        self._k.extend(k)
        self._v.extend(v)
        self._pos.extend(pos.tolist())

    @property
    def k(self) -> np.ndarray:
        return np.array(self._k).reshape(len(self), self.n_kv_heads, self.head_dim)

    @property
    def v(self) -> np.ndarray:
        return np.array(self._v).reshape(len(self), self.n_kv_heads, self.v_dim)

    @property
    def positions(self) -> np.ndarray:
        return np.array(self._pos, dtype=np.int64)


def attention_step(cache: KVCache, q: Any, k: Any, v: Any, positions: Any, *, rope: dict | None = None,
                   **attn: Any) -> np.ndarray:
    """One engine step (prefill: many tokens, decode: one): RoPE q and k at ``positions``,
    append k and v to ``cache``, then attend from q over everything the cache holds."""
    from oracle.ops.rope import rope as apply_rope

    if rope is not None:
        q, k = apply_rope(q, positions, **rope), apply_rope(k, positions, **rope)
    cache.append(k, v, positions)
    return attention(q, cache.k, cache.v, positions, cache.positions, **attn)
