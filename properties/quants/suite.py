"""The quantization properties as one table: (name, the formats it applies to, how to draw a case
for a format, the body). ``test_formats.py`` and the bug zoo (properties/zoo/quants.py) are
generated from ``PROPERTIES``, so a body is written once."""
from __future__ import annotations

from typing import Any, Callable

from hypothesis import strategies as st

from properties.measure import ErrorReport
from properties.property import Property
from properties.quants.checks import (check_dequantize, check_get_rows, check_idempotent, check_matvec,
                                      check_roundtrip, check_row_at_offset)
from properties.quants.records import RECORDS, QuantRecord, quant_records
from properties.quants.strategies import get_rows_cases, matvec_cases, raw_cases, row_offset_cases, value_cases


def quant_property(name: str, records: Callable[[], list[QuantRecord]], draw: Callable[[QuantRecord], st.SearchStrategy],
                   run: Callable[[Any, Any], ErrorReport | None], uses: frozenset[str] = frozenset({"dequantize"}),
                   label: str = "raw") -> Property:
    """A quant property judged at each format of ``records()``: ``draw(record)`` and ``run(impl,
    case)``; ``label`` is the results' dtype column (what kind of input the property sees)."""
    return Property(name, lambda record, **scope: draw(record), lambda impl, record, case: run(impl, case), uses,
                    points=records, label=label)


PROPERTIES: tuple[Property, ...] = (
    quant_property("dequantize_bit_exact", lambda: list(RECORDS), lambda r: raw_cases([r]), check_dequantize),
    quant_property("row_at_offset", lambda: list(RECORDS), row_offset_cases, lambda q, c: check_row_at_offset(q, *c),
                  frozenset({"dequantize_row"})),
    quant_property("get_rows", lambda: list(RECORDS), get_rows_cases, lambda q, c: check_get_rows(q, *c),
                  frozenset({"get_rows"})),
    quant_property("matvec_gamma_k", lambda: list(RECORDS), matvec_cases, lambda q, c: check_matvec(q, *c),
                  frozenset({"matvec"}), "float32"),
    quant_property("roundtrip_bound_in_steps", lambda: quant_records(quantizable=True),
                  lambda r: value_cases([r], bounded=True), check_roundtrip, label="float32"),
    quant_property("idempotent", lambda: quant_records(quantizable=True, idempotent=True),
                  lambda r: value_cases([r], bounded=True), check_idempotent, label="float32"),
)
