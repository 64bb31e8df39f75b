"""32-element blocks: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, IQ4_NL, MXFP4.

Byte map (offsets within a block):
  Q4_0  d@0  qs@2..18          Q4_1  d@0 m@2  qs@4..20
  Q5_0  d@0  qh@2..6  qs@6..22  Q5_1  d@0 m@2  qh@4..8  qs@8..24
  Q8_0  d@0  q(int8)@2..34     IQ4_NL d@0 qs@2..18    MXFP4 e(e8m0)@0 qs@1..17
"""
from __future__ import annotations

from typing import Any

import numpy as np

from gpu_impl.quants import fields
from gpu_impl.quants.layout import array_module, register

IQ4_NL_LEVELS = (-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113)
MXFP4_LEVELS = (0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12)  # 2·E2M1


def _codes4(blocks: Any, at: int):
    return fields.split_nibbles(blocks[:, at:at + 16])


def _codes5(blocks: Any, qh: int, qs: int):
    return _codes4(blocks, qs) | (fields.le_bits(blocks[:, qh:qh + 4]) << 4)


@register("Q4_0", 2, 32, 18)
def q4_0(blocks: Any):
    q = fields.f32(_codes4(blocks, 2)) - np.float32(8)
    return fields.f16_col(blocks, 0) * q


@register("Q4_1", 3, 32, 20)
def q4_1(blocks: Any):
    return fields.f16_col(blocks, 0) * fields.f32(_codes4(blocks, 4)) + fields.f16_col(blocks, 2)


@register("Q5_0", 6, 32, 22)
def q5_0(blocks: Any):
    q = fields.f32(_codes5(blocks, 2, 6)) - np.float32(16)
    return fields.f16_col(blocks, 0) * q


@register("Q5_1", 7, 32, 24)
def q5_1(blocks: Any):
    return fields.f16_col(blocks, 0) * fields.f32(_codes5(blocks, 4, 8)) + fields.f16_col(blocks, 2)


@register("Q8_0", 8, 32, 34)
def q8_0(blocks: Any):
    return fields.f16_col(blocks, 0) * fields.f32(fields.as_i8(blocks[:, 2:]))


def _levels(xp, table):
    return xp.asarray(np.asarray(table, dtype=np.float32))


@register("IQ4_NL", 20, 32, 18)
def iq4_nl(blocks: Any):
    xp = array_module(blocks)
    return fields.f16_col(blocks, 0) * _levels(xp, IQ4_NL_LEVELS)[_codes4(blocks, 2)]


def _odd_times_pow2(v: int) -> tuple[int, int]:
    """|v| = m * 2^s with m odd (m = s = 0 for v = 0)."""
    a = abs(v)
    s = (a & -a).bit_length() - 1 if a else 0
    return a >> s, s


# |level| = m * 2^s with m in {0, 1, 3}: the product level * 2^(e-128) is built from bits
_MX_M, _MX_S = (np.array(col, np.int32) for col in zip(*map(_odd_times_pow2, MXFP4_LEVELS)))
_MX_NEG = np.array([v < 0 for v in MXFP4_LEVELS], np.uint32)


@register("MXFP4", 39, 32, 17)
def mxfp4(blocks: Any):
    """level * 2^(e-128) as float32 bits, exactly, subnormals included. Not a float product:
    CuPy compiles its elementwise kernels with flush-to-zero, which turns the subnormal scales
    2^-128 and 2^-127 (e < 2) into 0 before they are multiplied."""
    xp = array_module(blocks)
    codes = _codes4(blocks, 1)
    m, neg = xp.asarray(_MX_M)[codes], xp.asarray(_MX_NEG)[codes]
    k = blocks[:, 0].astype(xp.int32)[:, None] - 128 + xp.asarray(_MX_S)[codes]  # value = m * 2^k
    three = (m == 3).astype(xp.int32)
    lead = k + three  # exponent of the leading bit
    normal = ((lead + 127).astype(xp.uint32) << 23) | (three.astype(xp.uint32) << 22)
    tiny = m.astype(xp.uint32) << xp.clip(k + 149, 0, 31).astype(xp.uint32)  # subnormal: m * 2^(k+149) ulps
    bits = xp.where(lead >= -126, normal, tiny)
    bits = xp.where(lead > 127, xp.uint32(0x7F800000), bits)  # past float32's range: inf, as the product
    bits = xp.where(m == 0, xp.uint32(0), bits) | (neg << 31)
    return bits.astype(xp.uint32).view(xp.float32)
