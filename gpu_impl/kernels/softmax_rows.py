"""Row statistics on device: the row max (one read, with the count of rows the validation
refuses), and the online row softmax: one read gives each chunk's (max, sum of exp), one more read
writes p. Several blocks per row at any batch size, float4 loads, no host synchronisation."""
from __future__ import annotations

from typing import Any

from gpu_impl.kernels._build import THREADS, fn, i32, i64, n_chunks, span


def row_max(x: Any) -> tuple[Any, Any]:
    """(float32 [B] max of each row of a contiguous float32 ``[B, V]``, uint32 0-d number of rows
    holding NaN or +inf). A NaN row's max is NaN; -0.0 < +0.0 (the float total order)."""
    import cupy
    B, V = x.shape
    ws = cupy.zeros(3 * B + 1, cupy.uint32)
    out = cupy.empty(B, cupy.float32)
    cols, per_row = span(B, V)
    fn("lc_row_max")((per_row, B), (THREADS,), (x, i64(V), i64(cols), ws, out))
    return out, ws[3 * B]


def row_stats(x: Any) -> Any:
    """float32 [B, n_chunks, 2]: per chunk of ``CHUNK`` columns, (max, sum exp(x - max))."""
    import cupy
    B, V = x.shape
    nc = n_chunks(V)
    part = cupy.empty((B, nc, 2), cupy.float32)
    fn("lc_row_stats")((nc, B), (THREADS,), (x, i64(V), i32(nc), part))
    return part


def softmax_rows(x: Any) -> Any:
    """Row softmax of a validated float32 CuPy array ``[B, V]``."""
    import cupy
    x = cupy.ascontiguousarray(x, dtype=cupy.float32)
    B, V = x.shape
    part = row_stats(x)
    y = cupy.empty_like(x)
    nc = n_chunks(V)
    fn("lc_softmax_write")((nc, B), (THREADS,), (x, i64(V), i32(nc), part, y))
    return y
