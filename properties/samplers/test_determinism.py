"""Property 7 (determinism): same seed, same tokens; same input, same bits; inputs untouched.
(Batch invariance, the other half of property 7, is in test_row_contract.py.)"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

from oracle.chain import SamplingParams, default_chain
from properties import recording
from properties.samplers.records import sampler_records
from properties.samplers.checks import run_impl
from properties.plugin import covered
from properties.samplers.strategies import record_cases
from properties.samplers.suite import params_for
from properties.samplers.strategies import make_logits

CHAINS = {
    "default": SamplingParams(seed=0),
    "penalties+typical+xtc": SamplingParams(seed=0, penalty_repeat=1.3, penalty_freq=0.2, typ_p=0.9,
                                            xtc_probability=0.5, xtc_threshold=0.1),
    "mirostat2": SamplingParams(seed=0, mirostat=2),
}


@pytest.mark.parametrize("name", CHAINS)
@given(seed=st.integers(0, 2**32 - 2), family=st.sampled_from(["peaked", "zipf", "plateaus"]))
def test_same_seed_same_tokens(name, seed, family):
    params = SamplingParams(**{**CHAINS[name].__dict__, "seed": seed})
    rows = [make_logits(family, 257, s) for s in range(40)]
    first = default_chain(params, 257)
    stream = [first.sample(r) for r in rows]
    second = default_chain(params, 257)
    assert [second.sample(r) for r in rows] == stream, "a second chain with the same seed differs"
    first.reset()
    assert [first.sample(r) for r in rows] == stream, "reset() does not restore the seeded stream"
    recording.note(name, "same_seed_same_tokens", "float32")


@pytest.mark.parametrize("record, dtype", params_for(sampler_records(impl_only=True), dtypes=False))
@given(data=st.data())
def test_impl_repeatable_and_pure(impl, record, dtype, data):
    case = data.draw(record_cases(record, dtype), label="case")
    before = case.logits.copy()
    params_before = {k: np.copy(v) for k, v in case.params.items()}
    with covered():
        a, b = run_impl(impl, record, case), run_impl(impl, record, case)
    for x, y in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
        assert np.array_equal(np.asarray(x), np.asarray(y)), "two calls on the same input differ"
    assert np.array_equal(case.logits, before, equal_nan=True), "the implementation wrote into its input logits"
    for k, v in params_before.items():
        assert np.array_equal(case.params[k], v), f"the implementation wrote into parameter {k}"
    recording.note(record.name, "repeatable", case.dtype)
