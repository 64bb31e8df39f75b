"""Unblocked float encodings: F32, F16, BF16 (one element per "block")."""
from __future__ import annotations

from typing import Any

from gpu_impl.quants import fields
from gpu_impl.quants.layout import array_module, register


@register("F32", 0, 1, 4)
def f32(blocks: Any):
    xp = array_module(blocks)
    return xp.ascontiguousarray(blocks).view(xp.float32)


@register("F16", 1, 1, 2)
def f16(blocks: Any):
    return fields.f16_col(blocks, 0)


@register("BF16", 30, 1, 2)
def bf16(blocks: Any):
    xp = array_module(blocks)
    return (fields.u16(blocks[:, 0], blocks[:, 1]).astype(xp.uint32) << 16).view(xp.float32)[:, None]
