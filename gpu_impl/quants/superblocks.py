"""256-element super-blocks: Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_XS.

Byte map:
  Q2_K  scales@0..16 qs@16..80 d@80 dmin@82
  Q3_K  hmask@0..32 qs@32..96 scales(12)@96 d@108
  Q4_K  d@0 dmin@2 scales(12)@4 qs@16..144
  Q5_K  d@0 dmin@2 scales(12)@4 qh@16..48 qs@48..176
  Q6_K  ql@0..128 qh@128..192 scales(int8)@192..208 d@208
  IQ4_XS d@0 scales_h(u16)@2 scales_l@4..8 qs@8..136
Sub-block scales are exact float32 products; values are fl(fl(scale·q) - min) or fl(scale·q).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from gpu_impl.quants import fields
from gpu_impl.quants.blocks32 import IQ4_NL_LEVELS, _levels
from gpu_impl.quants.layout import array_module, register

Q6_OFFSET = 32  # Q6_K codes are stored biased by +32


def kscale_min(packed: Any):
    """Q4_K/Q5_K: twelve bytes -> eight 6-bit scales and eight 6-bit mins ([n, 8] each)."""
    xp = array_module(packed)
    a, b, c = packed[:, 0:4], packed[:, 4:8], packed[:, 8:12]
    scales = xp.concatenate([a & 63, (c & 0xF) | ((a >> 6) << 4)], axis=1)
    mins = xp.concatenate([b & 63, (c >> 4) | ((b >> 6) << 4)], axis=1)
    return scales, mins


def _affine(scale: Any, q: Any, minimum: Any):
    """fl(fl(scale·q) - min) with one scale and min per row of ``scale`` ([n, subs])."""
    n, subs = scale.shape
    vals = scale[:, :, None] * fields.f32(q).reshape(n, subs, -1) - minimum[:, :, None]
    return vals.reshape(n, -1)


@register("Q2_K", 10, 256, 84)
def q2_k(blocks: Any):
    n = blocks.shape[0]
    sc = blocks[:, 0:16]
    q = fields.crumbs(blocks[:, 16:80].reshape(n, 2, 32)).reshape(n, 256)
    dl = fields.f16_col(blocks, 80) * fields.f32(sc & 0xF)
    ml = fields.f16_col(blocks, 82) * fields.f32(sc >> 4)
    return _affine(dl, q, ml)


def _k3_scales(packed: Any):
    xp = array_module(packed)
    n = packed.shape[0]
    low = fields.split_nibbles(packed[:, 0:8])
    high = fields.crumbs(packed[:, 8:12]).reshape(n, 16)
    return (low | (high << 4)).astype(xp.int8) - np.int8(32)


@register("Q3_K", 11, 256, 110)
def q3_k(blocks: Any):
    xp = array_module(blocks)
    n = blocks.shape[0]
    low = fields.crumbs(blocks[:, 32:96].reshape(n, 2, 32)).reshape(n, 256).astype(xp.int8)
    keep = fields.bit_planes(blocks[:, 0:32], 8).reshape(n, 256).astype(xp.int8)
    q = low - np.int8(4) + np.int8(4) * keep  # a *clear* mask bit subtracts 4
    dl = fields.f16_col(blocks, 108) * fields.f32(_k3_scales(blocks[:, 96:108]))
    return (dl[:, :, None] * fields.f32(q).reshape(n, 16, 16)).reshape(n, 256)


def _k45(blocks: Any, high_bits: Any | None, qs_at: int):
    n = blocks.shape[0]
    sc, mn = kscale_min(blocks[:, 4:16])
    q = fields.split_nibbles(blocks[:, qs_at:qs_at + 128].reshape(n, 4, 32)).reshape(n, 256)
    if high_bits is not None:
        q = q | (high_bits << 4)
    dl = fields.f16_col(blocks, 0) * fields.f32(sc)
    ml = fields.f16_col(blocks, 2) * fields.f32(mn)
    return _affine(dl, q, ml)


@register("Q4_K", 12, 256, 144)
def q4_k(blocks: Any):
    return _k45(blocks, None, 16)


@register("Q5_K", 13, 256, 176)
def q5_k(blocks: Any):
    n = blocks.shape[0]
    return _k45(blocks, fields.bit_planes(blocks[:, 16:48], 8).reshape(n, 256), 48)


@register("Q6_K", 14, 256, 210)
def q6_k(blocks: Any):
    xp = array_module(blocks)
    n = blocks.shape[0]
    low = fields.split_nibbles(blocks[:, 0:128].reshape(n, 2, 64)).reshape(n, 256)
    high = fields.crumbs(blocks[:, 128:192].reshape(n, 2, 32)).reshape(n, 256)
    q = (low | (high << 4)).astype(xp.int16) - Q6_OFFSET
    dl = fields.f16_col(blocks, 208) * fields.f32(fields.as_i8(blocks[:, 192:208]))
    return (dl[:, :, None] * fields.f32(q).reshape(n, 16, 16)).reshape(n, 256)


@register("IQ4_XS", 23, 256, 136)
def iq4_xs(blocks: Any):
    xp = array_module(blocks)
    n = blocks.shape[0]
    sl = blocks[:, 4:8]
    low = xp.stack([sl & 0xF, sl >> 4], axis=2).reshape(n, 8)
    high = (fields.u16(blocks[:, 2], blocks[:, 3])[:, None] >> (2 * xp.arange(8, dtype=xp.uint16))) & 3
    ls = (low.astype(xp.int16) | (high.astype(xp.int16) << 4)) - 32
    dl = fields.f16_col(blocks, 0) * fields.f32(ls)
    codes = fields.split_nibbles(blocks[:, 8:136].reshape(n, 8, 16)).reshape(n, 256)
    vals = _levels(xp, IQ4_NL_LEVELS)[codes]
    return (dl[:, :, None] * vals.reshape(n, 8, 32)).reshape(n, 256)
