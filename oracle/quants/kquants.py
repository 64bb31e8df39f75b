"""256-element super-blocks (k-quants): Q2_K, Q3_K, Q4_K, Q5_K, Q6_K.

Written from ggml's dequantize_row_q*_K loops as "where does element e live": for e in 0..255,
``h = e // 128`` (which half), ``r = e % 128``, ``s = e // 32`` (32-element sub-block) and so on.
Scales are exact in float32 (an f16 times a code of <= 8 bits); the rounding happens in the final
multiply / subtract, which ggml and gguf-py do as two separate float32 operations.
"""
from __future__ import annotations

import numpy as np

from oracle.quants.floats import f32, f64, half_at
from oracle.quants.formats import DECODERS, QType
from oracle.quants.legacy import field_bits

E = np.arange(256)
HALF, R = E // 128, E % 128
SUB32, L32 = E // 32, E % 32


def _per_element(per_sub: np.ndarray, size: int) -> np.ndarray:
    """Expand a per-sub-block column [n, 256/size] to [n, 256]."""
    return per_sub[:, E // size]


def k4_scale_min(blocks: np.ndarray, at: int) -> tuple[np.ndarray, np.ndarray]:
    """The eight 6-bit (scale, min) pairs of Q4_K/Q5_K packed in 12 bytes at ``at``
    (ggml get_scale_min_k4): j < 4 -> low 6 bits of bytes j and j+4; j >= 4 -> a nibble of byte
    j+4 plus the top two bits of bytes j-4 (scale) and j (min)."""
    q = blocks[:, at:at + 12].astype(np.int64)
    sc = np.empty((q.shape[0], 8), np.int64)
    mn = np.empty_like(sc)
    for j in range(8):
        if j < 4:
            sc[:, j], mn[:, j] = q[:, j] & 63, q[:, j + 4] & 63
        else:
            sc[:, j] = (q[:, j + 4] & 0xF) | ((q[:, j - 4] >> 6) << 4)
            mn[:, j] = (q[:, j + 4] >> 4) | ((q[:, j] >> 6) << 4)
    return sc, mn


def k3_scales(blocks: np.ndarray, at: int) -> np.ndarray:
    """Q3_K's sixteen 6-bit scales minus 32: low nibble of byte k (k < 8) or high nibble of byte
    k - 8, with two high bits from byte 8 + k % 4 at bit 2·(k // 4)."""
    q = blocks[:, at:at + 12].astype(np.int64)
    k = np.arange(16)
    low = (q[:, k % 8] >> (4 * (k // 8))) & 0xF
    high = (q[:, 8 + k % 4] >> (2 * (k // 4))) & 3
    return (low | (high << 4)) - 32


def _affine(d_code: np.ndarray, q: np.ndarray, m_code: np.ndarray) -> np.ndarray:
    """fl(fl(dl·q) - ml) with dl = d·scale and ml = dmin·min exact."""
    return f32(f64(f32(d_code * q)) - m_code)


def _q2_k(b: np.ndarray) -> np.ndarray:
    sc = b[:, 0:16].astype(np.int64)
    q = field_bits(b, 16 + 32 * HALF + L32, 2 * ((R // 32) % 4), 2)
    dl = f64(f32(half_at(b, 80) * (sc & 0xF)))
    ml = f64(f32(half_at(b, 82) * (sc >> 4)))
    return _affine(_per_element(dl, 16), q, _per_element(ml, 16))


def _q3_k(b: np.ndarray) -> np.ndarray:
    low = field_bits(b, 32 + 32 * HALF + L32, 2 * (R // 32), 2)
    hbit = field_bits(b, L32, 4 * HALF + R // 32, 1)
    q = low - 4 * (1 - hbit)  # the offset 4 applies when the mask bit is *clear*
    dl = f64(f32(half_at(b, 108) * k3_scales(b, 96)))
    return f32(_per_element(dl, 16) * q)


def _q45_k(b: np.ndarray, qs: int, qh: int | None) -> np.ndarray:
    sc, mn = k4_scale_min(b, 4)
    q = field_bits(b, qs + 32 * (E // 64) + L32, 4 * (SUB32 % 2), 4)
    if qh is not None:
        q = q + 16 * field_bits(b, qh + L32, SUB32, 1)
    dl = f64(f32(half_at(b, 0) * sc))
    ml = f64(f32(half_at(b, 2) * mn))
    return _affine(_per_element(dl, 32), q, _per_element(ml, 32))


def _q4_k(b: np.ndarray) -> np.ndarray:
    return _q45_k(b, 16, None)


def _q5_k(b: np.ndarray) -> np.ndarray:
    return _q45_k(b, 48, 16)


def _q6_k(b: np.ndarray) -> np.ndarray:
    quarter = R // 32
    low = field_bits(b, 64 * HALF + 32 * (quarter % 2) + L32, 4 * (quarter // 2), 4)
    high = field_bits(b, 128 + 32 * HALF + L32, 2 * quarter, 2)
    q = (low | (high << 4)) - 32
    scale = b[:, 192:208].astype(np.int64)
    scale = np.where(scale >= 128, scale - 256, scale)
    dl = f64(f32(half_at(b, 208) * scale))
    return f32(_per_element(dl, 16) * q)


DECODERS.update({QType.Q2_K: _q2_k, QType.Q3_K: _q3_k, QType.Q4_K: _q4_k, QType.Q5_K: _q5_k,
                 QType.Q6_K: _q6_k})
