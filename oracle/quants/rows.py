"""Row-level access to a quantized matrix, as engines use it: one row, an embedding lookup
(get_rows), and a matrix-vector product. Rows are whole blocks, so row r of a [rows, n] matrix
occupies bytes [base + r·B, base + (r+1)·B) with B = n / block_size · type_size."""
from __future__ import annotations

from typing import Sequence

import numpy as np

from oracle.quants.formats import BLOCK, as_bytes, check_shape, dequantize, qtype_of


def row_bytes(qtype: int, row_len: int) -> int:
    qt = qtype_of(qtype)
    check_shape(qt, (row_len,))
    bs, ts = BLOCK[qt]
    return row_len // bs * ts


def dequantize_row(raw: np.ndarray, qtype: int, row_len: int, row_index: int, base: int = 0) -> np.ndarray:
    """Row ``row_index`` of a matrix whose data starts at byte ``base`` of ``raw``."""
    data = as_bytes(raw)
    nb = row_bytes(qtype, row_len)
    if row_index < 0 or base < 0:
        raise ValueError(f"row index {row_index} and base offset {base} must be non-negative")
    start = base + row_index * nb
    if start + nb > data.size:
        raise ValueError(f"row {row_index} (bytes {start}..{start + nb}) lies past the end of the "
                         f"{data.size}-byte buffer")
    return dequantize(data[start:start + nb], qtype, (row_len,))


def _rows_cols(qtype: int, shape: Sequence[int]) -> tuple[int, int]:
    shape = check_shape(qtype_of(qtype), shape)
    return int(np.prod(shape[:-1], dtype=np.int64)), shape[-1]


def _check_ids(ids: np.ndarray, n_rows: int) -> np.ndarray:
    ids = np.asarray(ids)
    if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"row ids must be a 1-D integer array, got {ids.dtype} with shape {ids.shape}")
    bad = ids[(ids < 0) | (ids >= n_rows)]
    if bad.size:
        raise ValueError(f"row ids {bad[:6].tolist()} are outside [0, {n_rows})")
    return ids.astype(np.int64)


def get_rows(raw: np.ndarray, qtype: int, shape: Sequence[int], ids: np.ndarray) -> np.ndarray:
    """Embedding lookup: rows ``ids`` of the [rows, n] matrix, dequantized to float32 [len(ids), n]."""
    n_rows, n = _rows_cols(qtype, shape)
    if as_bytes(raw).size != n_rows * row_bytes(qtype, n):
        dequantize(raw, qtype, shape)  # raises the precise size error
    ids = _check_ids(ids, n_rows)
    out = np.empty((ids.size, n), np.float32)
    for k, r in enumerate(ids.tolist()):
        out[k] = dequantize_row(raw, qtype, n, r)
    return out


def matvec(raw: np.ndarray, qtype: int, shape: Sequence[int], x: np.ndarray) -> np.ndarray:
    """W·x for the [rows, n] quantized W, with float64 accumulation of the exact float32 weights
    (error <= n·2^-53·Σ|w·x| per row: negligible next to any float32 result it judges)."""
    n_rows, n = _rows_cols(qtype, shape)
    x = np.asarray(x)
    if x.shape != (n,):
        raise ValueError(f"x has shape {x.shape}, expected ({n},) for a {tuple(shape)} matrix")
    w = dequantize(raw, qtype, shape).reshape(n_rows, n).astype(np.float64)
    return w @ x.astype(np.float64)
