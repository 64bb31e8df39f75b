"""dist on device: chunk sums of exp(x - max) in float64, then one block per row finds the
crossing of S * u. Returns int64 ids; no host round trip."""
from __future__ import annotations

from typing import Any

from gpu_impl.kernels._build import THREADS, fn, i32, i64, n_chunks


def dist_rows(x: Any, row_max: Any, u: Any) -> Any:
    """x: validated float32 [B, V] CuPy array with a finite max per row; u: float64 [B] in [0, 1]."""
    import cupy as cp
    B, V = x.shape
    nc = n_chunks(V)
    part_sum = cp.empty((B, nc), cp.float64)
    part_last = cp.empty((B, nc), cp.int64)
    m = row_max.astype(cp.float32, copy=False)
    fn("lc_dist_partials")((nc, B), (THREADS,), (x, i64(V), i32(nc), m, part_sum, part_last))
    out = cp.empty(B, cp.int64)
    fn("lc_dist_pick")((B,), (THREADS,), (x, i64(V), i32(nc), m, part_sum, part_last,
                                          u.astype(cp.float64, copy=False), out))
    return out
