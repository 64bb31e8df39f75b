"""Scalar encodings (f32, f16, bf16, e8m0) and the rounding rule every block format uses.

The oracle computes in float64 and rounds to float32 exactly where ggml's reference rounds. For
one +, -, ×, ÷ of float32 operands, rounding the float64 result to float32 gives the correctly
rounded float32 result (double rounding is innocuous when 53 >= 2·24 + 2), and a product of a
float32 by a small integer is exact in float64, so ``f32(a * b)`` *is* the float32 product.
"""
from __future__ import annotations

import numpy as np

from oracle.quants.formats import DECODERS, ENCODERS, QType


def f32(x: np.ndarray) -> np.ndarray:
    """Round float64 values once to float32 (overflow to ±inf is the IEEE result, not an error)."""
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(x, dtype=np.float64).astype(np.float32)


def f64(x: np.ndarray) -> np.ndarray:
    return np.asarray(x).astype(np.float64)


def u16_le(blocks: np.ndarray, offset: int) -> np.ndarray:
    """The little-endian uint16 at byte ``offset`` of each block, as int64."""
    return blocks[:, offset].astype(np.int64) | (blocks[:, offset + 1].astype(np.int64) << 8)


def u32_le(blocks: np.ndarray, offset: int) -> np.ndarray:
    return sum(blocks[:, offset + k].astype(np.int64) << (8 * k) for k in range(4))


def half_value(bits: np.ndarray) -> np.ndarray:
    """IEEE binary16 bit patterns -> float64 values (exact; NaN for every NaN pattern)."""
    bits = np.asarray(bits, dtype=np.int64)
    sign = np.where(bits >> 15, -1.0, 1.0)
    exp = (bits >> 10) & 0x1F
    man = (bits & 0x3FF).astype(np.float64)
    finite = np.where(exp == 0, np.ldexp(man, -24), np.ldexp(man + 1024.0, exp - 25))
    special = np.where(man == 0, np.inf, np.nan)
    return sign * np.where(exp == 0x1F, special, finite)


def half_at(blocks: np.ndarray, offset: int) -> np.ndarray:
    """The f16 scale at byte ``offset`` of each block, as an exact float64 column [n, 1]."""
    return half_value(u16_le(blocks, offset))[:, None]


def e8m0_half(e: np.ndarray) -> np.ndarray:
    """ggml's MXFP4 scale: 2^(e-127) halved, i.e. 2^(e-128), for every byte e (255 is not NaN
    in ggml: it decodes to 2^127)."""
    return np.ldexp(1.0, np.asarray(e, dtype=np.int64) - 128)


def _f32_blocks(blocks: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(blocks).view("<f4").astype(np.float32)


def _f16_blocks(blocks: np.ndarray) -> np.ndarray:
    return f32(half_value(u16_le(blocks, 0)))[:, None]


def _bf16_blocks(blocks: np.ndarray) -> np.ndarray:
    # bf16 is the upper half of a float32: the value is the float32 with those 16 bits on top.
    return (u16_le(blocks, 0).astype(np.uint32) << 16).view(np.float32)[:, None]


def bf16_bits(x32: np.ndarray) -> np.ndarray:
    """float32 -> bf16 bit patterns: round to nearest, ties to even; NaN kept NaN with its quiet
    bit set (ggml_compute_fp32_to_bf16)."""
    n = np.asarray(x32, dtype=np.float32).view(np.uint32).astype(np.int64)
    upper, lower = n >> 16, n & 0xFFFF
    round_up = (lower > 0x8000) | ((lower == 0x8000) & (upper & 1 == 1))
    is_nan = (n & 0x7FFFFFFF) > 0x7F800000
    return np.where(is_nan, upper | 0x40, upper + round_up).astype(np.uint16)


def _encode_f32(x: np.ndarray) -> np.ndarray:
    return x.astype("<f4").view(np.uint8).reshape(-1, 4)


def _encode_f16(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return x.astype("<f2").view(np.uint8).reshape(-1, 2)


def _encode_bf16(x: np.ndarray) -> np.ndarray:
    return bf16_bits(x).astype("<u2").view(np.uint8).reshape(-1, 2)


DECODERS.update({QType.F32: _f32_blocks, QType.F16: _f16_blocks, QType.BF16: _bf16_blocks})
ENCODERS.update({QType.F32: _encode_f32, QType.F16: _encode_f16, QType.BF16: _encode_bf16})
