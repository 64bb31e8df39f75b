"""The oracle-run memo (``SamplerRecord.run_oracle``) must be invisible: the same answers as an
uncached run, a fresh copy each time, and no answer shared between records that differ only in
their oracle (``dataclasses.replace`` keeps the name)."""
from __future__ import annotations

import dataclasses

import numpy as np

from oracle import samplers as s
from properties.samplers import record as record_module
from properties.samplers.records import RECORDS_BY_NAME


def test_memoised_runs_are_copies_and_keyed_by_record_row_and_params():
    rec = RECORDS_BY_NAME["top_k"]
    row = np.random.default_rng(3).normal(size=4096)
    first = rec.run_oracle(row, {"k": 5})
    first.logits[:] = 0.0  # a caller changing its copy must not change the next answer
    again = rec.run_oracle(row, {"k": 5})
    assert np.isfinite(again.logits).all() and again.size == 5 and not np.array_equal(again.logits, first.logits)
    assert rec.run_oracle(row, {"k": 6}).size == 6  # other params: another entry
    assert rec.run_oracle(row + 1.0, {"k": 5}).logits.max() == row.max() + 1.0  # other row: another entry
    # same name, other oracle: its own answer, not the cached one
    other = dataclasses.replace(rec, oracle=lambda p: s.top_k(1))
    assert other.name == rec.name and other.run_oracle(row, {"k": 5}).size == 1
    assert rec.oracle_kept(row, {"k": 5}).sum() == 5


def test_memo_is_bounded():
    rec = RECORDS_BY_NAME["top_k"]
    row = np.arange(64.0)
    for k in range(1, 3 * record_module._RUNS_KEPT):
        rec.run_oracle(row, {"k": k})
    assert len(record_module._RUNS) == record_module._RUNS_KEPT
