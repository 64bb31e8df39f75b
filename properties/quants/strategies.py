"""Strategies for quantized data: hypothesis draws the structure (format, rows, blocks, which
scales are special, value family, seed) and NumPy fills the bytes, so a witness is a few
integers and names that rebuild the exact bytes."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np
from hypothesis import strategies as st

from fixtures.block_scales import WIDTH, normal_bits, put
from properties.quants.records import RECORDS, QuantRecord

# Bit patterns for the special values of each scale encoding (several where payload/sign vary).
SPECIALS: dict[str, dict[str, tuple[int, ...]]] = {
    "f16": {"nan": (0x7E00, 0x7C01, 0xFFFF), "inf": (0x7C00,), "-inf": (0xFC00,),
            "subnormal": (0x0001, 0x03FF, 0x8155), "zero": (0x0000,), "-zero": (0x8000,), "max": (0x7BFF, 0xFBFF)},
    "bf16": {"nan": (0x7FC0, 0x7F81, 0xFFFF), "inf": (0x7F80,), "-inf": (0xFF80,),
             "subnormal": (0x0001, 0x007F, 0x8040), "zero": (0x0000,), "-zero": (0x8000,), "max": (0x7F7F, 0xFF7F)},
    "f32": {"nan": (0x7FC00000, 0x7F800001, 0xFFFFFFFF), "inf": (0x7F800000,), "-inf": (0xFF800000,),
            "subnormal": (0x00000001, 0x007FFFFF, 0x80400000), "zero": (0,), "-zero": (0x80000000,),
            "max": (0x7F7FFFFF, 0xFF7FFFFF)},
    # e8m0 has no NaN, infinity or sign in ggml: its specials are the extreme exponents.
    "e8m0": {"nan": (0xFF,), "inf": (0xFE,), "-inf": (0x80,), "subnormal": (0x00, 0x01), "zero": (0x00,),
             "-zero": (0x02,), "max": (0xFF, 0xFE)},
}
KINDS = ("random", "nan", "inf", "-inf", "subnormal", "zero", "-zero", "max")
@dataclass(frozen=True)
class RawCase:
    """``rows`` rows of ``blocks`` blocks of ``record``'s format; block b's scales are of kind
    ``kinds[b]`` ("random": whatever the seeded bytes say; "normal": finite moderate)."""

    record: QuantRecord
    rows: int
    blocks: int
    seed: int
    kinds: tuple[str, ...]
    raw: np.ndarray = field(repr=False, compare=False, default=None)  # type: ignore[assignment]

    def _repr_pretty_(self, p, cycle) -> None:  # the witness: structure and seed, not the bytes
        p.text(repr(self))

    @property
    def shape(self) -> tuple[int, int]:
        return self.rows, self.blocks * self.record.block

    @property
    def row_bytes(self) -> int:
        return self.blocks * self.record.nbytes


def fill_raw(record: QuantRecord, rows: int, blocks: int, seed: int, kinds: Sequence[str]) -> RawCase:
    rng = np.random.default_rng(seed)
    n = rows * blocks
    raw = rng.integers(0, 256, n * record.nbytes, dtype=np.uint8)
    for b, kind in enumerate(kinds):
        for at, enc in record.scales:
            pos = b * record.nbytes + at
            if kind == "normal":
                put(raw, pos, WIDTH[enc], normal_bits(enc, rng))
            elif kind != "random":
                choices = SPECIALS[enc][kind]
                put(raw, pos, WIDTH[enc], choices[int(rng.integers(len(choices)))])
    return RawCase(record, rows, blocks, seed, tuple(kinds), raw)


@st.composite
def raw_cases(draw, records: Sequence[QuantRecord] = RECORDS, finite: bool = False, min_rows: int = 1,
              max_rows: int = 3) -> RawCase:
    record = draw(st.sampled_from(list(records)), label="record")
    rows = draw(st.integers(min_rows, max_rows), label="rows")
    blocks = draw(st.integers(1, 24 if record.block == 1 else 4), label="blocks")
    kind = st.just("normal") if finite else st.sampled_from(KINDS)
    kinds = draw(st.lists(kind, min_size=rows * blocks, max_size=rows * blocks), label="kinds")
    seed = draw(st.integers(0, 2**32 - 1), label="seed")
    return fill_raw(record, rows, blocks, seed, kinds)


# ---- float data for quantization ----

FAMILIES = ("normal", "zeros", "ties", "huge", "subnormal", "constant", "spike", "mixed", "bits")


def fill_values(family: str, shape: tuple[int, int], block: int, seed: int, max_mag: float,
                finite: bool = True) -> np.ndarray:
    rng = np.random.default_rng(seed)
    n_blocks = shape[0] * shape[1] // block
    x: np.ndarray
    if family == "normal":
        x = rng.standard_normal(shape) * 10.0 ** rng.uniform(-3, 2)
    elif family == "zeros":
        x = np.where(rng.random(shape) < 0.5, 0.0, -0.0)
    elif family == "ties":  # multiples of 1/2 times a power of two; block max set to ±R
        r = float(rng.choice([8, 16, 127, 15, 31]))
        e = float(2.0 ** rng.integers(-20, 8))
        x = np.round(rng.uniform(-r, r, shape) * 2) / 2 * e
        x.reshape(n_blocks, block)[:, 0] = -r * e
    elif family == "huge":
        x = rng.uniform(-1, 1, shape) * 3.4e38
    elif family == "subnormal":
        x = rng.uniform(-1, 1, shape) * 2.0**-126 * 2.0 ** rng.integers(-23, 3, shape)
    elif family == "constant":
        x = np.full(shape, rng.standard_normal() * 10.0 ** rng.uniform(-3, 3))
    elif family == "spike":
        x = rng.standard_normal(shape) * 1e-3
        x.reshape(-1)[rng.integers(x.size)] = rng.choice([-1, 1]) * 10.0 ** rng.uniform(0, 4)
    elif family == "mixed":  # every block its own magnitude, from subnormal to huge
        mags = 10.0 ** rng.uniform(-44, 38, (n_blocks, 1))
        x = (rng.standard_normal((n_blocks, block)) * mags).reshape(shape)
    else:  # "bits": arbitrary float32 bit patterns, half of them bf16 rounding ties (low half 0x8000)
        bits = rng.integers(0, 2**32, shape, dtype=np.uint64).astype(np.uint32)
        ties = rng.random(shape) < 0.5
        bits = np.where(ties, (bits & np.uint32(0xFFFF0000)) | np.uint32(0x8000), bits)
        x = bits.view(np.float32)
    with np.errstate(over="ignore", invalid="ignore"):
        x32 = x.astype(np.float32)
        if finite:
            x32 = np.where(np.isfinite(x32), x32, np.float32(0))
        big = np.isfinite(x32) & (np.abs(x32.astype(np.float64)) > max_mag)
        x32 = np.where(big, np.float32(np.sign(x32) * max_mag), x32)
    return x32


@dataclass(frozen=True)
class ValueCase:
    record: QuantRecord
    family: str
    rows: int
    blocks: int
    seed: int
    values: np.ndarray = field(repr=False, compare=False, default=None)  # type: ignore[assignment]

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(repr(self))


@st.composite
def value_cases(draw, records: Sequence[QuantRecord], bounded: bool = False) -> ValueCase:
    """Float data to quantize. ``bounded``: keep |x| below the record's ``max_magnitude`` (so its
    scales fit in f16, as the round-trip bound assumes)."""
    record = draw(st.sampled_from(list(records)), label="record")
    family = draw(st.sampled_from(FAMILIES), label="family")
    rows = draw(st.integers(1, 3), label="rows")
    blocks = draw(st.integers(1, 24 if record.block == 1 else 4), label="blocks")
    seed = draw(st.integers(0, 2**32 - 1), label="seed")
    max_mag = record.max_magnitude if bounded else float(np.finfo(np.float32).max)
    finite = record.block > 1 or bounded
    x = fill_values(family, (rows, blocks * record.block), record.block, seed, max_mag, finite)
    return ValueCase(record, family, rows, blocks, seed, x)


# ---- composite draws for the row-level properties ----

@st.composite
def row_offset_cases(draw, record: QuantRecord) -> tuple[RawCase, int, int]:
    """(matrix of 2..5 rows, base byte offset of the matrix in a larger buffer, row index)."""
    case = draw(raw_cases([record], min_rows=2, max_rows=5), label="case")
    base = draw(st.integers(0, 3 * record.nbytes + 5), label="base")
    return case, base, draw(st.integers(0, case.rows - 1), label="row")


@st.composite
def get_rows_cases(draw, record: QuantRecord) -> tuple[RawCase, list[int]]:
    case = draw(raw_cases([record], min_rows=1, max_rows=6), label="case")
    return case, draw(st.lists(st.integers(0, case.rows - 1), max_size=8), label="ids")


@st.composite
def matvec_cases(draw, record: QuantRecord) -> tuple[RawCase, int]:
    """A matrix with finite, moderate scales (so W·x is finite) and the seed of x ~ N(0, 1)."""
    case = draw(raw_cases([record], finite=True, max_rows=4), label="case")
    return case, draw(st.integers(0, 2**32 - 1), label="x_seed")
