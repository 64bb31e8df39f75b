"""Reading the fields of a block: scales, nibbles, bit planes. These are the seams where a port
usually goes wrong, so each lives in exactly one function."""
from __future__ import annotations

from typing import Any

from gpu_impl.quants.layout import array_module


def u16(col_lo: Any, col_hi: Any):
    xp = array_module(col_lo)
    return col_lo.astype(xp.uint16) | (col_hi.astype(xp.uint16) << 8)


def f16_col(blocks: Any, at: int):
    """The little-endian f16 at byte ``at`` of every block, as a float32 column [n, 1]."""
    xp = array_module(blocks)
    bits = u16(blocks[:, at], blocks[:, at + 1])
    return bits.view(xp.float16).astype(xp.float32)[:, None]


def split_nibbles(packed: Any):
    """Along the last axis, byte j holds element j in its low nibble and element j + len in its
    high nibble: return [low nibbles..., high nibbles...]."""
    xp = array_module(packed)
    return xp.concatenate([packed & 0xF, packed >> 4], axis=-1)


def le_bits(word_bytes: Any):
    """[n, k] bytes of a little-endian bit field -> [n, 8k] bits, bit i of the word first."""
    xp = array_module(word_bytes)
    shifts = xp.arange(8, dtype=xp.uint8)
    return ((word_bytes[:, :, None] >> shifts) & 1).reshape(word_bytes.shape[0], -1)


def bit_planes(mask: Any, planes: int):
    """[n, m] bytes -> [n, planes, m]: plane p is bit p of every byte."""
    xp = array_module(mask)
    shifts = xp.arange(planes, dtype=xp.uint8)[:, None]
    return (mask[:, None, :] >> shifts) & 1


def crumbs(packed: Any):
    """[..., m] bytes -> [..., 4, m]: the four 2-bit fields of every byte, lowest first."""
    xp = array_module(packed)
    shifts = xp.arange(0, 8, 2, dtype=xp.uint8)[:, None]
    return (packed[..., None, :] >> shifts) & 3


def as_i8(u8: Any):
    """Reinterpret bytes as two's-complement int8 (a wrapping cast, no copy semantics needed)."""
    xp = array_module(u8)
    return u8.astype(xp.int8)


def f32(x: Any):
    xp = array_module(x)
    return x.astype(xp.float32)
