"""gpu_impl's quantized formats against the oracle: bit-exact dequantization, row access at any
block-aligned offset, get_rows, mat-vec within γ_k, round-trip bounds, idempotence, bad input."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

import oracle.quants as oq
from properties import recording
from properties.quants.records import BY_NAME, RECORDS
from properties.plugin import covered
from properties.quants.checks import bit_mismatch
from properties.quants.suite import PROPERTIES
from properties.quants.strategies import fill_raw, raw_cases


def _property_params():
    return [pytest.param(p, r, id=f"{p.name}-{r.name}") for p in PROPERTIES for r in p.points()]


@pytest.mark.parametrize("prop, record", _property_params())
@given(data=st.data())
def test_quant_property(qimpl, prop, record, data):
    """Every (property, format) pair of ``properties.quants.suite.PROPERTIES``; see each check's docstring."""
    drawn = data.draw(prop.draw(record), label="case")
    with covered():
        report = prop.body(qimpl, record, drawn)
    recording.note(record.name, prop.name, prop.label, report, drawn)


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


def _bad_input_decision(call, qtype, raw, shape, match) -> None:
    with pytest.raises(ValueError, match=match):
        call(raw, int(qtype), shape)


# The oracle's and the implementation's decisions are separate tests: a test that takes the
# implementation must call it (properties/meta/test_meta_unjudged.py).
@pytest.mark.parametrize("qtype, raw, shape, match", _bad_cases())
def test_oracle_bad_input_is_a_clear_value_error(qtype, raw, shape, match):
    _bad_input_decision(SIDES["oracle"], qtype, raw, shape, match)


@pytest.mark.calls("dequantize")
@pytest.mark.parametrize("qtype, raw, shape, match", _bad_cases())
def test_bad_input_is_a_clear_value_error(qimpl, qtype, raw, shape, match):
    with covered():
        _bad_input_decision(lambda r, q, sh: qimpl("dequantize", r, q, sh), qtype, raw, shape, match)


@pytest.mark.parametrize("type_id", UNKNOWN_IDS)
def test_oracle_unknown_type_id_is_a_clear_value_error(type_id):
    with pytest.raises(ValueError, match="unknown"):
        SIDES["oracle"](np.zeros(64, np.uint8), type_id, (32,))


@pytest.mark.calls("dequantize")
@pytest.mark.parametrize("type_id", UNKNOWN_IDS)
def test_unknown_type_id_is_a_clear_value_error(qimpl, type_id):
    with covered(), pytest.raises(ValueError, match="unknown"):
        qimpl("dequantize", np.zeros(64, np.uint8), type_id, (32,))


def _row_helper_cases():
    case = fill_raw(BY_NAME["Q8_0"], 3, 1, 0, ["normal"] * 3)
    qt, n = int(case.record.qtype), case.shape[1]
    return [("dequantize_row", (case.raw, qt, n, 3), "past the end|needs bytes"),
            ("dequantize_row", (case.raw, qt, n, -1), "negative|non-negative"),
            ("get_rows", (case.raw, qt, case.shape, np.array([0, 3])), r"\[0, 3\)|outside"),
            ("matvec", (case.raw, qt, case.shape, np.zeros(n + 1, np.float32)), "shape")]


def test_oracle_row_helpers_reject_out_of_range():
    for fn, args, match in _row_helper_cases():
        with pytest.raises(ValueError, match=match):
            getattr(oq, fn)(*args)


@pytest.mark.calls(*sorted({fn for fn, _, _ in _row_helper_cases()}))
def test_row_helpers_reject_out_of_range(qimpl):
    with covered():
        for fn, args, match in _row_helper_cases():
            with pytest.raises(ValueError, match=match):
                qimpl(fn, *args)


@pytest.mark.parametrize("record", [pytest.param(r, id=r.name) for r in RECORDS])
@given(data=st.data())
def test_chunked_decoding_matches_one_pass(qimpl, record, data):
    """Big tensors are decoded in pieces (oracle always, impl on the host): with pieces of a few
    blocks, chosen so they do not divide the tensor, the result is still bit-exact."""
    from unittest import mock

    import gpu_impl.quants.layout as impl_layout
    import oracle.quants.formats as oracle_formats

    case = data.draw(raw_cases([record], min_rows=2, max_rows=3), label="case")
    whole = oq.dequantize(case.raw, record.qtype, case.shape)
    with mock.patch.object(oracle_formats, "CHUNK_ELEMENTS", 3 * record.block), \
            mock.patch.object(impl_layout, "HOST_CHUNK", 5 * record.block):
        pieces = oq.dequantize(case.raw, record.qtype, case.shape)
        with covered():
            got = qimpl("dequantize", case.raw, int(record.qtype), case.shape)
    assert bit_mismatch(pieces, whole) is None
    assert bit_mismatch(got, whole) is None
