"""32-element blocks with one f16 scale (and, for the _1 formats, an f16 minimum):
Q4_0, Q4_1, Q5_0, Q5_1, Q8_0.

Layout, per element i of a block (ggml's dequantize_row_q*):
- 4-bit code: byte ``qs + i % 16``, low nibble for i < 16, high nibble for i >= 16;
- Q5's fifth bit: bit i of the little-endian uint32 ``qh``;
- value: d·(q - offset)            (Q4_0: offset 8, Q5_0: 16, Q8_0: signed byte, no offset)
         fl(d·q) + m               (Q4_1, Q5_1: two roundings, as ggml's reference and gguf-py)
"""
from __future__ import annotations

import numpy as np

from oracle.quants.floats import f32, f64, half_at, u32_le
from oracle.quants.formats import DECODERS, ENCODERS, QType

ELEMS = np.arange(32)


def field_bits(blocks: np.ndarray, byte_of: np.ndarray, shift_of: np.ndarray, width: int) -> np.ndarray:
    """For each block and each element e: (blocks[:, byte_of[e]] >> shift_of[e]) & (2^width - 1)."""
    return (blocks[:, byte_of].astype(np.int64) >> shift_of) & ((1 << width) - 1)


def nibble_codes(blocks: np.ndarray, qs: int) -> np.ndarray:
    """The 32 four-bit codes of a block whose nibbles start at byte ``qs``."""
    return field_bits(blocks, qs + ELEMS % 16, 4 * (ELEMS // 16), 4)


def fifth_bit(blocks: np.ndarray, qh: int) -> np.ndarray:
    return (u32_le(blocks, qh)[:, None] >> ELEMS) & 1


def _q4_0(b: np.ndarray) -> np.ndarray:
    return f32(half_at(b, 0) * (nibble_codes(b, 2) - 8))


def _q4_1(b: np.ndarray) -> np.ndarray:
    return f32(f64(f32(half_at(b, 0) * nibble_codes(b, 4))) + half_at(b, 2))


def _q5_0(b: np.ndarray) -> np.ndarray:
    q = nibble_codes(b, 6) + 16 * fifth_bit(b, 2)
    return f32(half_at(b, 0) * (q - 16))


def _q5_1(b: np.ndarray) -> np.ndarray:
    q = nibble_codes(b, 8) + 16 * fifth_bit(b, 4)
    return f32(f64(f32(half_at(b, 0) * q)) + half_at(b, 2))


def _q8_0(b: np.ndarray) -> np.ndarray:
    q = b[:, 2:34].astype(np.int64)
    return f32(half_at(b, 0) * np.where(q >= 128, q - 256, q))


# ---- quantization (ggml's quantize_row_q*_ref, as gguf-py reproduces it) ----

def int_code(v: np.ndarray) -> np.ndarray:
    """Float -> 8-bit code the way the reference's float->int cast behaves on x86-64: truncate to
    int32 (NaN, ±inf and out-of-range become INT32_MIN) and keep the low byte. ggml's C is
    undefined behaviour for the non-finite case; this is what gguf-py (NumPy, x86-64) produces."""
    v = np.asarray(v, dtype=np.float64)
    ok = np.isfinite(v) & (np.abs(v) < 2.0**31)
    return np.where(ok, np.trunc(np.where(ok, v, 0.0)), -(2**31)).astype(np.int64) & 0xFF


def reciprocal(d32: np.ndarray) -> np.ndarray:
    """id = 1/d in float32, 0 for d == 0 (1/d overflows to inf for tiny subnormal d, as in C)."""
    with np.errstate(divide="ignore"):
        return np.where(d32 == 0, np.float32(0), f32(1.0 / f64(d32)))


def signed_absmax(x: np.ndarray) -> np.ndarray:
    """The first element of largest magnitude, with its sign (a column [n, 1])."""
    return np.take_along_axis(x, np.argmax(np.abs(x), axis=1)[:, None], axis=1)


def half_bytes(v32: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return np.asarray(v32, dtype=np.float32).astype("<f2").view(np.uint8).reshape(-1, 2)


def pack_nibbles(q: np.ndarray) -> np.ndarray:
    """32 codes per block -> 16 bytes: byte j holds element j (low) and element j + 16 (high)."""
    return ((q[:, :16] & 0xF) | ((q[:, 16:] & 0xF) << 4)).astype(np.uint8)


def pack_fifth_bits(q: np.ndarray) -> np.ndarray:
    word = sum(((q[:, e] >> 4) & 1) << e for e in range(32))
    return np.stack([(word >> (8 * k)) & 0xFF for k in range(4)], axis=1).astype(np.uint8)


def _symmetric_codes(x: np.ndarray, levels: int) -> tuple[np.ndarray, np.ndarray]:
    """Q4_0 / Q5_0: d = max/-levels; q = min(2·levels - 1, trunc(fl(fl(x·id) + levels + 0.5)))."""
    d = f32(f64(signed_absmax(x)) / -levels)
    scaled = f32(f64(x) * f64(reciprocal(d)))
    q = np.minimum(int_code(f32(f64(scaled) + (levels + 0.5))), 2 * levels - 1)
    return d, q


def _affine_codes(x: np.ndarray, top: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Q4_1 / Q5_1: d = (max - min)/top; q = min(top, trunc(fl(fl(x - min)·id) + 0.5))."""
    lo, hi = x.min(axis=1, keepdims=True), x.max(axis=1, keepdims=True)
    d = f32(f64(f32(f64(hi) - f64(lo))) / top)
    scaled = f32(f64(f32(f64(x) - f64(lo))) * f64(reciprocal(d)))
    q = np.minimum(int_code(f32(f64(scaled) + 0.5)), top)
    return d, lo, q


def _enc_q4_0(x: np.ndarray) -> np.ndarray:
    d, q = _symmetric_codes(x, 8)
    return np.concatenate([half_bytes(d), pack_nibbles(q)], axis=1)


def _enc_q5_0(x: np.ndarray) -> np.ndarray:
    d, q = _symmetric_codes(x, 16)
    return np.concatenate([half_bytes(d), pack_fifth_bits(q), pack_nibbles(q)], axis=1)


def _enc_q4_1(x: np.ndarray) -> np.ndarray:
    d, lo, q = _affine_codes(x, 15)
    return np.concatenate([half_bytes(d), half_bytes(lo), pack_nibbles(q)], axis=1)


def _enc_q5_1(x: np.ndarray) -> np.ndarray:
    d, lo, q = _affine_codes(x, 31)
    return np.concatenate([half_bytes(d), half_bytes(lo), pack_fifth_bits(q), pack_nibbles(q)], axis=1)


def _enc_q8_0(x: np.ndarray) -> np.ndarray:
    """d = max|x|/127; q = round half away from zero (C roundf) of fl(x·id)."""
    d = f32(f64(np.abs(x).max(axis=1, keepdims=True)) / 127)
    v = f64(f32(f64(x) * f64(reciprocal(d))))
    with np.errstate(invalid="ignore"):
        rounded = np.sign(v) * np.floor(np.abs(v) + 0.5)  # exact in float64 for float32 v
    return np.concatenate([half_bytes(d), int_code(rounded).astype(np.uint8)], axis=1)


DECODERS.update({QType.Q4_0: _q4_0, QType.Q4_1: _q4_1, QType.Q5_0: _q5_0, QType.Q5_1: _q5_1,
                 QType.Q8_0: _q8_0})
ENCODERS.update({QType.Q4_0: _enc_q4_0, QType.Q4_1: _enc_q4_1, QType.Q5_0: _enc_q5_0,
                 QType.Q5_1: _enc_q5_1, QType.Q8_0: _enc_q8_0})
