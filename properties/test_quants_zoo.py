"""Bug zoo for the quantization formats: deliberately broken copies of gpu_impl.quants, each a
bug seen in real ports. Every property of ``quant_checks.PROPERTIES`` runs against every mutant
(format by format, as the real tests do); the test asserts that at least one kills it, and the
kill table (which properties, after how many examples) goes to ``--lc-results`` as ``quant_zoo``."""
from __future__ import annotations

import importlib
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any
from unittest import mock

import numpy as np
import pytest
from hypothesis import Phase, given, settings

from properties import recording
from properties.backends import load_impl
from properties import PropertyFailure
from properties.profiles import current_profile
from properties.quants.suite import PROPERTIES, QuantProperty

IMPL = "gpu_impl.quants"
ZOO_EXAMPLES = {"nightly": 100}.get(current_profile(), 10)  # per (property, format) pair


def _bad_kscale_min(packed):
    """Q4_K/Q5_K: the top two bits of mins 4..7 taken from the *scale* bytes 0..3."""
    a, b, c = packed[:, 0:4], packed[:, 4:8], packed[:, 8:12]
    scales = np.concatenate([a & 63, (c & 0xF) | ((a >> 6) << 4)], axis=1)
    mins = np.concatenate([b & 63, (c >> 4) | ((a >> 6) << 4)], axis=1)
    return scales, mins


def _swapped_nibbles(packed):
    return np.concatenate([packed >> 4, packed & 0xF], axis=-1)


def _msb_first_bits(word_bytes):
    shifts = np.arange(7, -1, -1, dtype=np.uint8)
    return ((word_bytes[:, :, None] >> shifts) & 1).reshape(word_bytes.shape[0], -1)


def _f16_read_as_bf16(blocks, at):
    bits = blocks[:, at].astype(np.uint32) | (blocks[:, at + 1].astype(np.uint32) << 8)
    return (bits << 16).view(np.float32)[:, None]


def _row_offset_in_elements(fmt, row_len, row_index):
    return row_index * row_len


@dataclass(frozen=True)
class Mutant:
    name: str
    description: str
    patches: tuple[tuple[str, str, Any], ...]
    """(module under gpu_impl.quants, attribute, replacement)."""

    def __repr__(self) -> str:
        return self.name


MUTANTS = (
    Mutant("kscale_min_unpacking", "Q4_K/Q5_K 6-bit min unpacking takes high bits from the scale bytes",
           (("superblocks", "kscale_min", _bad_kscale_min),)),
    Mutant("nibble_order_swapped", "element j read from the high nibble and j+16 from the low one",
           (("fields", "split_nibbles", _swapped_nibbles),)),
    Mutant("q5_high_bit_position", "Q5_0/Q5_1 fifth bit read MSB-first within each qh byte",
           (("fields", "le_bits", _msb_first_bits),)),
    Mutant("f16_scale_as_bf16", "f16 scales decoded as bf16 (bits << 16)",
           (("fields", "f16_col", _f16_read_as_bf16),)),
    Mutant("row_offset_in_elements", "row r starts at byte r·row_len instead of r·blocks·type_size",
           (("rows", "row_byte_offset", _row_offset_in_elements),)),
    Mutant("q6k_offset_missing", "Q6_K codes used without the signed offset -32",
           (("superblocks", "Q6_OFFSET", 0),)),
)


def examples_until_failure(prop: QuantProperty, record, qimpl, max_examples: int) -> int | None:
    """Run ``prop`` on ``record`` like the real test does; the example count at the first failure,
    or None if the property held for all examples. No shrinking: only the count matters here."""
    seen = {"n": 0, "first": None}

    @settings(max_examples=max_examples, derandomize=True, database=None, deadline=None,
              phases=(Phase.explicit, Phase.generate))
    @given(prop.draw(record))
    def run(drawn):
        seen["n"] += 1
        try:
            prop.run(qimpl, drawn)
        except PropertyFailure:
            if seen["first"] is None:
                seen["first"] = seen["n"]
            raise

    try:
        run()
    except PropertyFailure:
        return seen["first"]
    return None


_TABLE: list[dict] = []


@pytest.mark.parametrize("mutant", MUTANTS, ids=str)
def test_quant_mutant_is_killed(mutant: Mutant):
    qimpl = load_impl(IMPL, "numpy")
    killed_by: dict[str, int] = {}
    with ExitStack() as stack:
        for module, attr, repl in mutant.patches:
            stack.enter_context(mock.patch.object(importlib.import_module(f"{IMPL}.{module}"), attr, repl))
        for prop in PROPERTIES:
            for record in prop.records():
                n = examples_until_failure(prop, record, qimpl, ZOO_EXAMPLES)
                if n is not None:
                    killed_by[f"{prop.name}[{record.name}]"] = n
                    break  # this property kills it; the next property
    row = {"mutant": mutant.name, "description": mutant.description, "killed": bool(killed_by),
           "examples_to_kill": min(killed_by.values(), default=None),
           "killed_by": ", ".join(f"{k} after {v}" for k, v in killed_by.items())}
    _TABLE.append(row)
    recording.table("quant_zoo", _TABLE)
    assert killed_by, f"mutant {mutant.name} ({mutant.description}) survived every quant property"


def test_unmutated_impl_survives_the_zoo_runner():
    """The runner itself can fail to fail: the real impl must pass the same runs (control)."""
    qimpl = load_impl(IMPL, "numpy")
    for prop in PROPERTIES:
        record = prop.records()[-1]
        assert examples_until_failure(prop, record, qimpl, 5) is None, prop.name
