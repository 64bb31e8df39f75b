"""Ops: batch invariance (``properties.ops.batch_invariance``). Every op with a batch (token)
leading axis gives each row the same bits in the whole batch, alone, in sub-batches and permuted,
where the contract (``--contract batch_invariant``) or the implementation's own
"batch_invariant:<function>" claim demands it; otherwise what each op did is recorded (table
"batch_invariance": op, claimed, observed) and the test passes."""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from properties import recording
from properties.ops.batch_invariance import BATCH_OPS, batch_examples, check_batch_invariance, record
from properties.plugin import covered


@pytest.mark.parametrize("bop", BATCH_OPS, ids=str)
@given(data=st.data())
def test_batch_invariance(oimpl, bop, data):
    example = data.draw(batch_examples(bop), label="example")
    with covered():
        seen = check_batch_invariance(oimpl, bop, example)
    recording.table("batch_invariance", record(oimpl, seen))
    recording.note(bop.name, "batch_invariance", seen.dtype)
