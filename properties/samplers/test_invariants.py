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

from properties.samplers.records import sampler_records
from properties.samplers.suite import MIN_KEEP, MONOTONE, NOOP, SOFTMAX_INVARIANTS, run

FILTERS = sampler_records("filter")
NOOP_RECORDS = [r for r in sampler_records("filter", "transform") if NOOP.applies(r)]


@pytest.mark.calls(SOFTMAX_INVARIANTS)
@given(data=st.data())
def test_softmax_invariants(impl, data):
    run(impl, SOFTMAX_INVARIANTS, None, "float32", data)


@pytest.mark.parametrize("record", NOOP_RECORDS, ids=str)
@given(data=st.data())
def test_noop_parameters_are_exact_noops(impl, record, data):
    run(impl, NOOP, record, "float32", data)


@pytest.mark.parametrize("record", [r for r in FILTERS if MONOTONE.applies(r)], ids=str)
@given(data=st.data())
def test_survivors_monotone_in_parameter(impl, record, data):
    run(impl, MONOTONE, record, "float32", data)


@pytest.mark.parametrize("record", [r for r in FILTERS if MIN_KEEP.applies(r)], ids=str)
@given(data=st.data())
def test_min_keep_and_nonempty(impl, record, data):
    run(impl, MIN_KEEP, record, "float32", data)
