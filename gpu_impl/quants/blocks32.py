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


def e8m0_half(e: Any):
    """2^(e-128) as float32, built from its bit pattern (exact, subnormal for e < 2)."""
    xp = array_module(e)
    e32 = e.astype(xp.uint32)
    bits = xp.where(e32 >= 2, (e32 - 1) << 23, xp.uint32(1) << (e32 + 21))
    return bits.astype(xp.uint32).view(xp.float32)


@register("MXFP4", 39, 32, 17)
def mxfp4(blocks: Any):
    xp = array_module(blocks)
    return e8m0_half(blocks[:, 0])[:, None] * _levels(xp, MXFP4_LEVELS)[_codes4(blocks, 1)]
