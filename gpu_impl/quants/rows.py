"""Row access on a quantized [rows, n] matrix: one row, embedding lookup, mat-vec (fp32)."""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from gpu_impl.quants.layout import Format, array_module, checked_shape, dequantize, flat_bytes, lookup

MATVEC_CHUNK_ELEMS = 1 << 22  # dequantize at most 16 MiB of float32 weights at a time


def row_byte_offset(fmt: Format, row_len: int, row_index: int) -> int:
    """Rows are whole blocks: row r starts r · (row_len / block) · block-bytes in."""
    return row_index * (row_len // fmt.block) * fmt.nbytes


def dequantize_row(raw: Any, qtype: int, row_len: int, row_index: int, base: int = 0):
    """Row ``row_index`` of a matrix stored from byte ``base`` of ``raw``, as float32 [row_len]."""
    fmt = lookup(qtype)
    checked_shape(fmt, (row_len,))
    data = flat_bytes(raw)
    if row_index < 0 or base < 0:
        raise ValueError(f"{fmt.name}: negative row index {row_index} or base offset {base}")
    start = base + row_byte_offset(fmt, row_len, row_index)
    stop = start + row_len // fmt.block * fmt.nbytes
    if stop > data.size:
        raise ValueError(f"{fmt.name}: row {row_index} needs bytes [{start}, {stop}) of a {data.size}-byte buffer")
    return dequantize(data[start:stop], qtype, (row_len,))


def _matrix(raw: Any, qtype: int, shape: Sequence[int]):
    fmt = lookup(qtype)
    shape = checked_shape(fmt, shape)
    rows, n = int(np.prod(shape[:-1], dtype=np.int64)), shape[-1]
    data = flat_bytes(raw)
    per_row = n // fmt.block * fmt.nbytes
    if data.size != rows * per_row:
        dequantize(data, qtype, shape)  # raises the size error with the details
    return fmt, data.reshape(rows, per_row), rows, n


def get_rows(raw: Any, qtype: int, shape: Sequence[int], ids: Any):
    """Rows ``ids`` of the matrix, float32 [len(ids), n] (ggml_get_rows on a quantized table)."""
    fmt, mat, rows, n = _matrix(raw, qtype, shape)
    xp = array_module(mat)
    ids = xp.asarray(ids)
    if ids.ndim != 1 or ids.dtype.kind not in "iu":
        raise ValueError(f"{fmt.name}: ids must be a 1-D integer array, got {ids.dtype} {ids.shape}")
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) >= rows):
        raise ValueError(f"{fmt.name}: ids must lie in [0, {rows}), got min {int(ids.min())} max {int(ids.max())}")
    if ids.size == 0:
        return xp.zeros((0, n), dtype=xp.float32)
    return dequantize(mat[ids], qtype, (ids.size, n))


def matvec(raw: Any, qtype: int, shape: Sequence[int], x: Any):
    """W·x in float32 for the quantized [rows, n] W (any summation order: error <= n·u·Σ|w·x|)."""
    fmt, mat, rows, n = _matrix(raw, qtype, shape)
    xp = array_module(mat)
    x = xp.asarray(x)
    if x.shape != (n,):
        raise ValueError(f"{fmt.name}: x has shape {x.shape}, expected ({n},)")
    x32 = x.astype(xp.float32)
    out = xp.empty(rows, dtype=xp.float32)
    step = max(1, MATVEC_CHUNK_ELEMS // n)
    for r0 in range(0, rows, step):
        r1 = min(rows, r0 + step)
        w = dequantize(mat[r0:r1], qtype, (r1 - r0, n))
        out[r0:r1] = w @ x32
    return out
