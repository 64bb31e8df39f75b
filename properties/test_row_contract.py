"""Property 7: the row contract of a fixed-shape batched sampler.

Batch invariance: row b of a batched call is bit-identical to the same call on row b alone (with
row b's parameters). Rows are independent in llama.cpp (one sequence at a time), so any
dependence on the batch is a bug: a parameter broadcast from row 0, a bias applied to the
neighbouring row, a threshold or normaliser reduced over the whole batch.

Bad rows are refused: a NaN or +inf logit, and for a selector a row with no finite logit, raise
ValueError; never an out-of-range token id or a silently computed result.
"""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from properties import recording
from properties.catalogue import sampler_records
from properties.checks import BAD_ROWS, check_batch_invariance, check_rejects_bad_row
from properties.helpers import covered, params_for, record_cases

IMPL_RECORDS = sampler_records(impl_only=True)


@pytest.mark.parametrize("record, dtype", params_for(IMPL_RECORDS, dtypes=False))
@given(data=st.data())
def test_batch_invariance(impl, record, dtype, data):
    case = data.draw(record_cases(record, dtype), label="case")
    with covered():
        check_batch_invariance(impl, record, case)
    recording.note(record.name, "batch_invariance", case.dtype)


@pytest.mark.parametrize("record", IMPL_RECORDS, ids=str)
@given(data=st.data())
def test_bad_row_is_refused(impl, record, data):
    case = data.draw(record_cases(record, "float32"), label="case")
    row = data.draw(st.integers(0, case.batch - 1), label="row")
    col = data.draw(st.integers(0, case.vocab - 1), label="col")
    bad = data.draw(st.sampled_from(BAD_ROWS), label="bad")
    with covered():
        check_rejects_bad_row(impl, record, case, row, col, bad)
    recording.note(record.name, "bad_row", case.dtype)
