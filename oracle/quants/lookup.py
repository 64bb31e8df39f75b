"""Formats whose 4-bit codes index a fixed table of levels: IQ4_NL, IQ4_XS (non-linear int8
levels, f16 scales) and MXFP4 (E2M1 levels doubled, one e8m0 power-of-two scale).

Layout per element e: code nibble in byte ``qs + 16·(e // 32) + e % 16``, low nibble when
``e % 32 < 16``. IQ4_XS has a 6-bit scale (minus 32) per 32 elements: low nibble from
``scales_l[ib // 2]``, two high bits from the uint16 ``scales_h`` at bit 2·ib.
"""
from __future__ import annotations

import numpy as np

from oracle.quants.floats import e8m0_half, f32, f64, half_at, u16_le
from oracle.quants.formats import DECODERS, QType
from oracle.quants.legacy import field_bits, nibble_codes

IQ4_LEVELS = np.array([-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113], np.int64)
# E2M1 magnitudes {0, .5, 1, 1.5, 2, 3, 4, 6} times two, sign in the code's top bit.
MXFP4_LEVELS = np.array([0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12], np.int64)


def _iq4_nl(b: np.ndarray) -> np.ndarray:
    return f32(half_at(b, 0) * IQ4_LEVELS[nibble_codes(b, 2)])


def _iq4_xs(b: np.ndarray) -> np.ndarray:
    e = np.arange(256)
    ib = np.arange(8)
    low = field_bits(b, 4 + ib // 2, 4 * (ib % 2), 4)
    high = (u16_le(b, 2)[:, None] >> (2 * ib)) & 3
    dl = f64(f32(half_at(b, 0) * ((low | (high << 4)) - 32)))
    codes = field_bits(b, 8 + 16 * (e // 32) + e % 16, 4 * ((e % 32) // 16), 4)
    return f32(dl[:, e // 32] * IQ4_LEVELS[codes])


def _mxfp4(b: np.ndarray) -> np.ndarray:
    d = f64(f32(e8m0_half(b[:, 0])))[:, None]  # 2^-128 and 2^-127 are float32 subnormals: exact
    return f32(d * MXFP4_LEVELS[nibble_codes(b, 1)])


DECODERS.update({QType.IQ4_NL: _iq4_nl, QType.IQ4_XS: _iq4_xs, QType.MXFP4: _mxfp4})
