"""GGML block formats: type ids, block geometry, and the checked entry points.

Every format stores ``block_size`` consecutive elements of a row in ``type_size`` bytes; a row is
a whole number of blocks, so row ``r`` of a [rows, n] tensor starts at byte r·(n/block_size)·type_size.
Type ids are GGML's (they are what a GGUF file stores).
"""
from __future__ import annotations

from enum import IntEnum
from math import prod
from typing import Callable, Sequence

import numpy as np


class QType(IntEnum):
    F32 = 0
    F16 = 1
    Q4_0 = 2
    Q4_1 = 3
    Q5_0 = 6
    Q5_1 = 7
    Q8_0 = 8
    Q2_K = 10
    Q3_K = 11
    Q4_K = 12
    Q5_K = 13
    Q6_K = 14
    IQ4_NL = 20
    IQ4_XS = 23
    BF16 = 30
    MXFP4 = 39


# (elements per block, bytes per block)
BLOCK: dict[QType, tuple[int, int]] = {
    QType.F32: (1, 4), QType.F16: (1, 2), QType.BF16: (1, 2),
    QType.Q4_0: (32, 18), QType.Q4_1: (32, 20), QType.Q5_0: (32, 22), QType.Q5_1: (32, 24),
    QType.Q8_0: (32, 34),
    QType.Q2_K: (256, 84), QType.Q3_K: (256, 110), QType.Q4_K: (256, 144), QType.Q5_K: (256, 176),
    QType.Q6_K: (256, 210),
    QType.IQ4_NL: (32, 18), QType.IQ4_XS: (256, 136), QType.MXFP4: (32, 17),
}

BlockDecoder = Callable[[np.ndarray], np.ndarray]
"""[n_blocks, type_size] uint8 -> [n_blocks, block_size] float32."""
BlockEncoder = Callable[[np.ndarray], np.ndarray]
"""[n_blocks, block_size] float32 -> [n_blocks, type_size] uint8."""

DECODERS: dict[QType, BlockDecoder] = {}
CHUNK_ELEMENTS = 1 << 20
ENCODERS: dict[QType, BlockEncoder] = {}


def qtype_of(qtype: int) -> QType:
    """The QType for a GGML type id; ValueError for ids this oracle does not know."""
    try:
        return QType(int(qtype))
    except (ValueError, TypeError):
        raise ValueError(f"unknown or unsupported GGML type id {qtype!r}; "
                         f"supported: {', '.join(f'{t.name}={t.value}' for t in QType)}") from None


def byte_count(qtype: int, n_elements: int) -> int:
    bs, ts = BLOCK[qtype_of(qtype)]
    return n_elements // bs * ts


def check_shape(qtype: QType, shape: Sequence[int]) -> tuple[int, ...]:
    shape = tuple(int(s) for s in shape)
    if not shape or any(s < 0 for s in shape):
        raise ValueError(f"{qtype.name}: invalid tensor shape {shape}")
    if prod(shape) == 0:
        raise ValueError(f"{qtype.name}: empty tensor (shape {shape}) has nothing to (de)quantize")
    bs = BLOCK[qtype][0]
    if shape[-1] % bs:
        raise ValueError(f"{qtype.name}: row length {shape[-1]} is not a multiple of the block size {bs}")
    return shape


def as_bytes(raw: np.ndarray | bytes) -> np.ndarray:
    """A flat uint8 view of ``raw`` (bytes-like, or any C-contiguous array viewed as bytes)."""
    if isinstance(raw, (bytes, bytearray, memoryview)):
        return np.frombuffer(raw, dtype=np.uint8)
    arr = np.asarray(raw)
    if arr.dtype != np.uint8:
        raise ValueError(f"raw quantized data must be uint8 bytes, got dtype {arr.dtype}")
    return arr.reshape(-1)


def dequantize(raw: np.ndarray, qtype: int, shape: Sequence[int]) -> np.ndarray:
    """Decode a whole tensor of ``shape`` stored as ``qtype`` blocks to float32."""
    qt = qtype_of(qtype)
    shape = check_shape(qt, shape)
    data = as_bytes(raw)
    bs, ts = BLOCK[qt]
    if data.size % ts:
        raise ValueError(f"{qt.name}: byte length {data.size} is not a multiple of the type size {ts}")
    want = prod(shape) // bs * ts
    if data.size != want:
        raise ValueError(f"{qt.name}: shape {shape} needs {want} bytes, got {data.size}")
    blocks = data.reshape(-1, ts)
    step = max(1, CHUNK_ELEMENTS // bs)  # bounded float64 temporaries for big tensors
    out = np.empty((blocks.shape[0], bs), np.float32)
    with np.errstate(all="ignore"):  # inf·0 = NaN and overflow to inf are the IEEE results we specify
        for i in range(0, blocks.shape[0], step):
            out[i:i + step] = DECODERS[qt](blocks[i:i + step])
    return out.reshape(shape)


def quantize(values: np.ndarray, qtype: int) -> np.ndarray:
    """Encode float data (cast to float32 first, as ggml does) into ``qtype`` blocks along the
    last axis: returns uint8 of shape [..., n / block_size · type_size]."""
    qt = qtype_of(qtype)
    if qt not in ENCODERS:
        raise ValueError(f"{qt.name}: quantization is not defined by the reference (dequantize only); "
                         f"quantizable: {', '.join(t.name for t in ENCODERS)}")
    x = np.asarray(values)
    if not np.issubdtype(x.dtype, np.floating):
        raise ValueError(f"{qt.name}: quantize expects floating-point values, got {x.dtype}")
    shape = check_shape(qt, x.shape)
    x32 = x.astype(np.float32)
    bs, ts = BLOCK[qt]
    if bs > 1 and not np.isfinite(x32).all():
        # ggml's reference converts NaN/inf scaled values to integers: undefined behaviour in C.
        raise ValueError(f"{qt.name}: cannot quantize non-finite values (the reference is undefined there)")
    with np.errstate(all="ignore"):
        out = ENCODERS[qt](x32.reshape(-1, bs))
    return out.reshape(*shape[:-1], shape[-1] // bs * ts)
