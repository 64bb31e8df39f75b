"""A fixed-capacity KV cache: preallocated float32 buffers (fixed shapes, as a GPU engine
allocates them) filled in order, with the explicit position of every cell.

Refusals (ValueError, as in the oracle): appending past the capacity ("KV cache full"),
k/v whose heads or dims do not match, a positions array of the wrong length, a negative
position, or a position the cache already holds.
"""
from __future__ import annotations

from typing import Any

from gpu_impl.ops._xp import array_module, f32, ints, ndim


class KVCache:
    def __init__(self, n_kv_heads: int, head_dim: int, capacity: int, v_dim: int | None = None) -> None:
        if min(n_kv_heads, head_dim, capacity) < 1 or (v_dim is not None and v_dim < 1):
            raise ValueError("n_kv_heads, head_dim, capacity and v_dim must be >= 1")
        self.n_kv_heads, self.head_dim, self.capacity = int(n_kv_heads), int(head_dim), int(capacity)
        self.v_dim = self.head_dim if v_dim is None else int(v_dim)
        self.used = 0
        self._buf: tuple[Any, Any, Any] | None = None  # allocated on the first append's backend

    def __len__(self) -> int:
        return self.used

    def _alloc(self, xp) -> tuple[Any, Any, Any]:
        if self._buf is None:
            c, h = self.capacity, self.n_kv_heads
            self._buf = (xp.zeros((c, h, self.head_dim), xp.float32), xp.zeros((c, h, self.v_dim), xp.float32),
                         xp.full((c,), -1, dtype=xp.int64))
        return self._buf

    def append(self, k: Any, v: Any, positions: Any) -> None:
        xp = array_module(k, v)
        k, v = f32(xp, k, "k"), f32(xp, v, "v")
        ndim(k, 3, "k")
        ndim(v, 3, "v")
        n = k.shape[0]
        want_k, want_v = (n, self.n_kv_heads, self.head_dim), (n, self.n_kv_heads, self.v_dim)
        if tuple(k.shape) != want_k or tuple(v.shape) != want_v:
            raise ValueError(f"k {tuple(k.shape)} / v {tuple(v.shape)} do not match the cache's "
                             f"[*, {self.n_kv_heads}, {self.head_dim}] / [*, {self.n_kv_heads}, {self.v_dim}]")
        pos = ints(xp, positions, "positions", 1)
        if pos.shape[0] != n:
            raise ValueError(f"{pos.shape[0]} positions for {n} new entries")
        if self.used + n > self.capacity:
            raise ValueError(f"KV cache full: capacity {self.capacity}, holds {self.used}, appending {n}")
        if bool((pos < 0).any()):
            raise ValueError("positions must be >= 0")
        kb, vb, pb = self._alloc(xp)
        held = xp.concatenate([pb[: self.used], pos])
        if xp.unique(held).shape[0] != held.shape[0]:
            raise ValueError("a position is already held by the cache (each position is stored once)")
        kb[self.used:self.used + n], vb[self.used:self.used + n], pb[self.used:self.used + n] = k, v, pos
        self.used += n

    @property
    def k(self) -> Any:
        return self._buf[0][: self.used] if self._buf is not None else None

    @property
    def v(self) -> Any:
        return self._buf[1][: self.used] if self._buf is not None else None

    @property
    def positions(self) -> Any:
        return self._buf[2][: self.used] if self._buf is not None else None
