"""gpu_impl's quantized formats against the oracle: bit-exact dequantization, row access at any
block-aligned offset, get_rows, mat-vec within γ_k, round-trip bounds, idempotence, bad input."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

import oracle.quants as oq
from properties import recording
from properties.catalogue.quants import RECORDS, quant_records
from properties.helpers import covered
from properties.quant_checks import (check_dequantize, check_get_rows, check_idempotent, check_matvec,
                                     check_roundtrip, check_row_at_offset)
from properties.quant_helpers import qimpl, record_params  # noqa: F401  (fixture)
from properties.quant_strategies import fill_raw, raw_cases, value_cases

@pytest.mark.parametrize("record", record_params(RECORDS))
@given(data=st.data())
def test_dequantize_bit_exact(qimpl, record, data):
    case = data.draw(raw_cases([record]), label="case")
    with covered():
        check_dequantize(qimpl, case)
    recording.note(record.name, "dequantize_bit_exact", "raw")


@pytest.mark.parametrize("record", record_params(RECORDS))
@given(data=st.data())
def test_row_at_block_aligned_offset(qimpl, record, data):
    case = data.draw(raw_cases([record], min_rows=2, max_rows=5), label="case")
    base = data.draw(st.integers(0, 3 * record.nbytes + 5), label="base")
    row = data.draw(st.integers(0, case.rows - 1), label="row")
    with covered():
        check_row_at_offset(qimpl, case, base, row)
    recording.note(record.name, "row_at_offset", "raw")


@pytest.mark.parametrize("record", record_params(RECORDS))
@given(data=st.data())
def test_get_rows(qimpl, record, data):
    case = data.draw(raw_cases([record], min_rows=1, max_rows=6), label="case")
    ids = data.draw(st.lists(st.integers(0, case.rows - 1), max_size=8), label="ids")
    with covered():
        check_get_rows(qimpl, case, ids)
    recording.note(record.name, "get_rows", "raw")


@pytest.mark.parametrize("record", record_params(RECORDS))
@given(data=st.data())
def test_matvec_error_model(qimpl, record, data):
    case = data.draw(raw_cases([record], finite=True, max_rows=4), label="case")
    seed = data.draw(st.integers(0, 2**32 - 1), label="x_seed")
    with covered():
        rep = check_matvec(qimpl, case, seed)
    recording.note(record.name, "matvec_gamma_k", "float32", rep)


@pytest.mark.parametrize("record", record_params(quant_records(quantizable=True)))
@given(data=st.data())
def test_roundtrip_within_block_bound(qimpl, record, data):
    case = data.draw(value_cases([record], bounded=True), label="case")
    with covered():
        rep = check_roundtrip(qimpl, case)
    recording.note(record.name, "roundtrip_bound_in_steps", "float32", rep)


@pytest.mark.parametrize("record", record_params(quant_records(quantizable=True, idempotent=True)))
@given(data=st.data())
def test_requantize_is_idempotent(qimpl, record, data):
    case = data.draw(value_cases([record], bounded=True), label="case")
    with covered():
        check_idempotent(qimpl, case)
    recording.note(record.name, "idempotent", "float32")


# ---- bad input: the same cases for the oracle and the implementation ----

UNKNOWN_IDS = (4, 5, 9, 15, 16, 24, 31, 34, 40, 41, 99, -1, 2**31)


def _bad_cases():
    out = []
    for r in RECORDS:
        ok = fill_raw(r, 2, 2, 0, ["normal"] * 4)
        n = ok.shape[1]
        out += [
            pytest.param(r.qtype, ok.raw[:-1], ok.shape, "not a (whole number|multiple)|bytes", id=f"{r.name}-short"),
            pytest.param(r.qtype, np.concatenate([ok.raw, ok.raw[:r.nbytes]]), ok.shape, "needs|bytes",
                         id=f"{r.name}-extra-block"),
            pytest.param(r.qtype, ok.raw[:0], (0, n), "empty", id=f"{r.name}-empty"),
        ]
        if r.block > 1:
            out.append(pytest.param(r.qtype, ok.raw, (2 * n // r.block * r.block + 1,), "block", id=f"{r.name}-ragged"))
    return out


SIDES = {"oracle": lambda raw, qt, shape: oq.dequantize(raw, qt, shape)}


@pytest.mark.parametrize("side", ["oracle", "impl"])
@pytest.mark.parametrize("qtype, raw, shape, match", _bad_cases())
def test_bad_input_is_a_clear_value_error(qimpl, side, qtype, raw, shape, match):
    fn = SIDES.get(side) or (lambda r, q, s: qimpl("dequantize", r, int(q), s))
    with pytest.raises(ValueError, match=match):
        fn(raw, int(qtype), shape)


@pytest.mark.parametrize("side", ["oracle", "impl"])
@pytest.mark.parametrize("type_id", UNKNOWN_IDS)
def test_unknown_type_id_is_a_clear_value_error(qimpl, side, type_id):
    fn = SIDES.get(side) or (lambda r, q, s: qimpl("dequantize", r, q, s))
    with pytest.raises(ValueError, match="unknown"):
        fn(np.zeros(64, np.uint8), type_id, (32,))


@pytest.mark.parametrize("side", ["oracle", "impl"])
def test_row_helpers_reject_out_of_range(qimpl, side):
    case = fill_raw(oq.BLOCK and RECORDS[7], 3, 1, 0, ["normal"] * 3)  # Q8_0, 3 rows
    qt, n = int(case.record.qtype), case.shape[1]
    call = (lambda fn, *a: getattr(oq, fn)(*a)) if side == "oracle" else (lambda fn, *a: qimpl(fn, *a))
    with covered():
        for fn, args, match in [
            ("dequantize_row", (case.raw, qt, n, 3), "past the end|needs bytes"),
            ("dequantize_row", (case.raw, qt, n, -1), "negative|non-negative"),
            ("get_rows", (case.raw, qt, case.shape, np.array([0, 3])), r"\[0, 3\)|outside"),
            ("matvec", (case.raw, qt, case.shape, np.zeros(n + 1, np.float32)), "shape"),
        ]:
            with pytest.raises(ValueError, match=match):
                call(fn, *args)
