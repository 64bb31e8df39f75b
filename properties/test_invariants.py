"""Property 3: invariants that hold for oracle and implementation alike.

softmax: sums to 1 within (2·ceil(log2 n) + 4)·u (one tree sum for S, one for the check, one
rounding per division), non-negative, exactly 0 at -inf, and bitwise shift invariant for shifts
that are exact in fp32 (x - max is then the same float). Filters: no-op parameters are exact
no-ops; survivor sets are nested as k / p / n grow (or shrink for min_p); min_keep is honoured;
at least one token survives whenever one was finite.
"""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from properties import recording
from properties.catalogue import sampler_records
from properties.checks import check_min_keep, check_monotone, check_noop, check_softmax_invariants
from properties.helpers import covered, record_cases
from properties.strategies import cases

FILTERS = sampler_records("filter")
NOOP = [r for r in sampler_records("filter", "transform") if r.noop]


@given(case=cases(dtypes=("float32", "float16", "bfloat16")), shift=st.integers(-256, 256))
def test_softmax_invariants(impl, case, shift):
    with covered():
        check_softmax_invariants(impl, case, shift)
    recording.note("softmax", "invariants", case.dtype)


@pytest.mark.parametrize("record", NOOP, ids=str)
@given(data=st.data())
def test_noop_parameters_are_exact_noops(impl, record, data):
    case = data.draw(cases(dtypes=("float32",)), label="case")
    noop = data.draw(st.sampled_from(record.noop), label="noop")
    with covered():
        check_noop(impl, record, case, noop)
    recording.note(record.name, "noop", case.dtype)


@pytest.mark.parametrize("record", [r for r in FILTERS if r.monotone], ids=str)
@given(data=st.data())
def test_survivors_monotone_in_parameter(impl, record, data):
    case = data.draw(record_cases(record, "float32"), label="case")
    other = data.draw(record.params(case.batch, case.vocab), label="other")[record.monotone[0][0]]
    with covered():
        check_monotone(impl, record, case, other)
    recording.note(record.name, "monotone", case.dtype)


@pytest.mark.parametrize("record", FILTERS, ids=str)
@given(data=st.data())
def test_min_keep_and_nonempty(impl, record, data):
    case = data.draw(record_cases(record, "float32"), label="case")
    with covered():
        check_min_keep(impl, record, case)
    recording.note(record.name, "min_keep", case.dtype)
