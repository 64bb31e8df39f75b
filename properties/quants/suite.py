"""The quantization properties as one table: (name, the formats it applies to, how to draw a case
for a format, the body). ``test_formats.py`` and the bug zoo (properties/zoo/quants.py) are
generated from ``PROPERTIES``, so a body is written once."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from hypothesis import strategies as st

from properties.measure import ErrorReport
from properties.quants.checks import (check_dequantize, check_get_rows, check_idempotent, check_matvec,
                                      check_roundtrip, check_row_at_offset)
from properties.quants.records import RECORDS, QuantRecord, quant_records
from properties.quants.strategies import get_rows_cases, matvec_cases, raw_cases, row_offset_cases, value_cases


@dataclass(frozen=True)
class QuantProperty:
    name: str
    records: Callable[[], list[QuantRecord]]
    draw: Callable[[QuantRecord], st.SearchStrategy]
    run: Callable[[Any, Any], ErrorReport | None]
    uses: frozenset[str] = frozenset({"dequantize"})
    """The impl functions the body calls."""
    label: str = "raw"
    """The 'dtype' column of the results (what kind of input the property sees)."""

    def _repr_pretty_(self, p, cycle) -> None:
        p.text(self.name)


PROPERTIES: tuple[QuantProperty, ...] = (
    QuantProperty("dequantize_bit_exact", lambda: list(RECORDS), lambda r: raw_cases([r]), check_dequantize),
    QuantProperty("row_at_offset", lambda: list(RECORDS), row_offset_cases, lambda q, c: check_row_at_offset(q, *c),
                  frozenset({"dequantize_row"})),
    QuantProperty("get_rows", lambda: list(RECORDS), get_rows_cases, lambda q, c: check_get_rows(q, *c),
                  frozenset({"get_rows"})),
    QuantProperty("matvec_gamma_k", lambda: list(RECORDS), matvec_cases, lambda q, c: check_matvec(q, *c),
                  frozenset({"matvec"}), "float32"),
    QuantProperty("roundtrip_bound_in_steps", lambda: quant_records(quantizable=True),
                  lambda r: value_cases([r], bounded=True), check_roundtrip, label="float32"),
    QuantProperty("idempotent", lambda: quant_records(quantizable=True, idempotent=True),
                  lambda r: value_cases([r], bounded=True), check_idempotent, label="float32"),
)
