"""The quant-format bug zoo: gpu_impl.quants with one internal helper patched to carry a bug seen in
real ports. Each mutant is hunted by every quant property (``properties.quants.suite``) on every
format it applies to, in suite order; a helper every public function reaches (a field decoder)
is hunted by them all, the row offset only by what calls it (``dequantize_row``)."""
from __future__ import annotations

import contextlib
import importlib
import types
from typing import Any, Iterator
from unittest import mock

import numpy as np

from properties.quants.suite import PROPERTIES
from properties.zoo.runner import Domain, Mutant, Property, like

Patch = tuple[str, str, Any]
"""(module under gpu_impl.quants, attribute, replacement)."""


def _bad_kscale_min(packed):
    """Q4_K/Q5_K: the top two bits of mins 4..7 taken from the *scale* bytes 0..3."""
    a, b, c = packed[:, 0:4], packed[:, 4:8], packed[:, 8:12]
    scales = np.concatenate([a & 63, (c & 0xF) | ((a >> 6) << 4)], axis=1)
    mins = np.concatenate([b & 63, (c >> 4) | ((a >> 6) << 4)], axis=1)
    return scales, mins


def _swapped_nibbles(packed):
    return np.concatenate([packed >> 4, packed & 0xF], axis=-1)


def _msb_first_bits(word_bytes):
    shifts = like(np.arange(7, -1, -1, dtype=np.uint8), word_bytes)  # CuPy does not mix in NumPy arrays
    return ((word_bytes[:, :, None] >> shifts) & 1).reshape(word_bytes.shape[0], -1)


def _f16_read_as_bf16(blocks, at):
    bits = blocks[:, at].astype(np.uint32) | (blocks[:, at + 1].astype(np.uint32) << 8)
    return (bits << 16).view(np.float32)[:, None]


def _row_offset_in_elements(fmt, row_len, row_index):
    return row_index * row_len


def _patched(patches: tuple[Patch, ...]):
    """``Mutant.apply``: the helpers are swapped inside gpu_impl.quants for as long as the hunt runs."""
    @contextlib.contextmanager
    def apply(base: types.ModuleType) -> Iterator[types.ModuleType]:
        with contextlib.ExitStack() as stack:
            for module, attr, repl in patches:
                stack.enter_context(mock.patch.object(importlib.import_module(f"{base.__name__}.{module}"), attr, repl))
            yield base
    return apply


def _mutant(name: str, description: str, patches: tuple[Patch, ...], replaces: set[str] | None = None) -> Mutant:
    return Mutant(name, description, None if replaces is None else frozenset(replaces), _patched(patches))


def properties() -> list[Property]:
    """Every (property, format) pair, property by property, formats in catalogue order."""
    return [p.at(r, f"{p.name}[{r.name}]") for p in PROPERTIES for r in p.points()]


MUTANTS: tuple[Mutant, ...] = (
    _mutant("kscale_min_unpacking", "Q4_K/Q5_K 6-bit min unpacking takes high bits from the scale bytes",
           (("superblocks", "kscale_min", _bad_kscale_min),)),
    _mutant("nibble_order_swapped", "element j read from the high nibble and j+16 from the low one",
           (("fields", "split_nibbles", _swapped_nibbles),)),
    _mutant("q5_high_bit_position", "Q5_0/Q5_1 fifth bit read MSB-first within each qh byte",
           (("fields", "le_bits", _msb_first_bits),)),
    _mutant("f16_scale_as_bf16", "f16 scales decoded as bf16 (bits << 16)",
           (("fields", "f16_col", _f16_read_as_bf16),)),
    _mutant("row_offset_in_elements", "row r starts at byte r·row_len instead of r·blocks·type_size",
           (("rows", "row_byte_offset", _row_offset_in_elements),), {"dequantize_row"}),
    _mutant("q6k_offset_missing", "Q6_K codes used without the signed offset -32",
           (("superblocks", "Q6_OFFSET", 0),)),
)

DOMAIN = Domain("quants", "gpu_impl.quants", properties, MUTANTS)
