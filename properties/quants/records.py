"""One record per GGML block format: geometry, where its scales live, the oracle, the impl
function, and (for formats ggml can quantize) the per-element round-trip error bound.

Round-trip bounds, for a finite block whose scale fits in f16 (x = input, x^ = dequantized):
- symmetric Q4_0 / Q5_0 (L = 8 / 16): d = max/(-L) with max the signed element of largest
  magnitude, t = x/d in [-L, L]. Codes are trunc(t + L + 1/2) clipped to 2L-1, so
  |x - x^| <= |d|·(max(1/2, t - (L-1)) + (4L+1)u) + L·|d - d16|   (the clip costs up to one step
  at t -> L; (4L+1)u covers the two float32 roundings before truncation; d16 = stored f16 scale).
- Q8_0: d = max|x|/127, |x - x^| <= |d|·(1/2 + 3·127u) + 127·|d - d16|  (never clipped).
- affine Q4_1 / Q5_1 (T = 15 / 31): d = (max - min)/T, t = (x - min)/d in [0, T],
  |x - x^| <= |d|·(1/2 + (5T+2)u) + T·|d - d16| + |min - m16| + u·(T·|d16| + |m16|)
  (the last term is the float32 rounding of fl(d16·q) + m16).
- BF16 / F16: |x - x^| <= 2^-8·|x| + 2^-134 / 2^-11·|x| + 2^-25 (half an ulp, subnormal floor).
- F32: exact.
The unit each report is given in is the block's step |d| (or |x| for the float formats).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

import oracle.quants as oq
from fixtures.block_scales import SCALES
from oracle.quants import QType
from properties.numerics import U16, U32 as U, UBF16
Bound = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]
"""(x [n_blocks, block] float64, stored bytes [n_blocks, type_size]) -> (allowed |x - x^|, unit)."""


def _half(stored: np.ndarray, at: int) -> np.ndarray:
    return stored[:, at:at + 2].copy().view("<f2").astype(np.float64)


def _symmetric(levels: int) -> Bound:
    def bound(x: np.ndarray, stored: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        i = np.argmax(np.abs(x), axis=1)[:, None]
        d = np.take_along_axis(x, i, axis=1) / -levels
        t = np.divide(x, d, out=np.zeros_like(x), where=d != 0)
        steps = np.maximum(0.5, t - (levels - 1)) + (4 * levels + 1) * U
        return np.abs(d) * steps + levels * np.abs(d - _half(stored, 0)), np.abs(d)
    return bound


def _q8_0(x: np.ndarray, stored: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    d = np.abs(x).max(axis=1, keepdims=True) / 127
    return d * (0.5 + 3 * 127 * U) + 127 * np.abs(d - _half(stored, 0)), d


def _affine(top: int) -> Bound:
    def bound(x: np.ndarray, stored: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        lo = x.min(axis=1, keepdims=True)
        d = (x.max(axis=1, keepdims=True) - lo) / top
        d16, m16 = _half(stored, 0), _half(stored, 2)
        allowed = (d * (0.5 + (5 * top + 2) * U) + top * np.abs(d - d16) + np.abs(lo - m16)
                   + U * (top * np.abs(d16) + np.abs(m16)))
        return np.broadcast_to(allowed, x.shape), d
    return bound


def _relative(u: float, floor: float) -> Bound:
    def bound(x: np.ndarray, stored: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return u * np.abs(x) + floor, np.maximum(np.abs(x), floor)
    return bound


@dataclass(frozen=True)
class QuantRecord:
    qtype: QType
    block: int
    nbytes: int
    scales: tuple[tuple[int, str], ...]
    """(byte offset in a block, encoding) of every scale (``fixtures.block_scales.SCALES``, the
    file format's layout): 'f16', 'e8m0', or for the float formats the element itself."""
    quantize: bool = False
    """ggml has a reference quantizer (and gguf-py reproduces it)."""
    roundtrip: Bound | None = None
    idempotent: bool = False
    """dequantize∘quantize is a projection (P(P(x)) == P(x) as values)."""
    max_magnitude: float = 1e4
    """Round-trip inputs stay below this so every stored scale fits its f16 field."""
    impl_fn: str = "dequantize"

    @property
    def name(self) -> str:
        return self.qtype.name

    def __repr__(self) -> str:
        return self.name

    def _repr_pretty_(self, p, cycle) -> None:  # hypothesis prints witnesses with this
        p.text(self.name)

    def oracle(self, raw: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
        return oq.dequantize(raw, self.qtype, shape)


def _rec(qt: QType, **kw) -> QuantRecord:
    block, nbytes = oq.BLOCK[qt]
    return QuantRecord(qt, block, nbytes, SCALES[qt.name], **kw)


# plain floats round to nearest: u relative, and half the smallest subnormal (f16 2^-24, bf16 2^-133)
# absolute below the normal range
RECORDS: tuple[QuantRecord, ...] = (
    _rec(QType.F32, quantize=True, roundtrip=_relative(0.0, 0.0), idempotent=True, max_magnitude=1e38),
    _rec(QType.F16, quantize=True, roundtrip=_relative(U16, 2.0**-25), idempotent=True,
         max_magnitude=6e4),
    _rec(QType.BF16, quantize=True, roundtrip=_relative(UBF16, 2.0**-134), idempotent=True,
         max_magnitude=1e38),
    _rec(QType.Q4_0, quantize=True, roundtrip=_symmetric(8), idempotent=True),
    _rec(QType.Q4_1, quantize=True, roundtrip=_affine(15)),
    _rec(QType.Q5_0, quantize=True, roundtrip=_symmetric(16), idempotent=True),
    _rec(QType.Q5_1, quantize=True, roundtrip=_affine(31)),
    _rec(QType.Q8_0, quantize=True, roundtrip=_q8_0, idempotent=True),
    _rec(QType.Q2_K),
    _rec(QType.Q3_K),
    _rec(QType.Q4_K),
    _rec(QType.Q5_K),
    _rec(QType.Q6_K),
    _rec(QType.IQ4_NL),
    _rec(QType.IQ4_XS),
    _rec(QType.MXFP4),
)
BY_NAME = {r.name: r for r in RECORDS}


def quant_records(*, quantizable: bool = False, idempotent: bool = False) -> list[QuantRecord]:
    return [r for r in RECORDS if (r.quantize or not quantizable) and (r.idempotent or not idempotent)]
