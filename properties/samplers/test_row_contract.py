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

from properties.samplers.records import sampler_records
from properties.samplers.suite import BAD_ROW, BATCH_INVARIANCE, params_for, run

IMPL_RECORDS = sampler_records(impl_only=True)


@pytest.mark.parametrize("record, dtype", params_for(IMPL_RECORDS, dtypes=False, prop=BATCH_INVARIANCE))
@given(data=st.data())
def test_batch_invariance(impl, record, dtype, data):
    run(impl, BATCH_INVARIANCE, record, dtype, data)


@pytest.mark.parametrize("record", IMPL_RECORDS, ids=str)
@given(data=st.data())
def test_bad_row_is_refused(impl, record, data):
    run(impl, BAD_ROW, record, "float32", data)
