"""Attention and the KV cache: the engine step against the oracle, decode token by token ==
prefill for every prefix length, causality (also with NaN/inf in future entries), GQA == MHA
with repeated K/V, and a permuted cache with permuted positions."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, strategies as st

from properties import recording
from properties.ops_attention_checks import (check_causality, check_decode_equals_prefill, check_gqa_equals_mha,
                                             check_permuted_cache, check_step_matches_oracle)
from properties.ops_helpers import covered, dtype_params, measured, oimpl  # noqa: F401
from properties.ops_strategies import attention_cases, step_cases

DTYPES = dtype_params()


@pytest.mark.parametrize("dtype", DTYPES)
@given(data=st.data())
def test_step_matches_oracle(oimpl, dtype, data):
    case, rope = data.draw(step_cases(dtype), label="step")
    with covered():
        measured("attention_step", "impl_vs_oracle", dtype, check_step_matches_oracle(oimpl, case, rope))


@pytest.mark.parametrize("dtype", DTYPES)
@given(data=st.data())
def test_decode_equals_prefill_at_every_prefix(oimpl, dtype, data):
    case, rope = data.draw(step_cases(dtype), label="step")
    with covered():
        check_decode_equals_prefill(oimpl, case, rope)
    recording.note("attention_step", "decode_equals_prefill", dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@given(data=st.data())
def test_future_keys_do_not_change_earlier_outputs(oimpl, dtype, data):
    case = data.draw(attention_cases(dtype), label="case")
    cutoff = int(data.draw(st.sampled_from(sorted(set(case.arrays["q_pos"].tolist()))), label="cutoff"))
    assume((case.arrays["k_pos"] > cutoff).any())
    poison = data.draw(st.sampled_from(["random", "nan", "inf"]), label="poison")
    with covered():
        check_causality(oimpl, case, cutoff, poison)
    recording.note("attention", "causality", dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@given(data=st.data())
def test_gqa_equals_mha_with_repeated_kv(oimpl, dtype, data):
    case = data.draw(attention_cases(dtype), label="case")
    assume(case.shape["group"] > 1)
    with covered():
        measured("attention", "gqa_equals_mha", dtype, check_gqa_equals_mha(oimpl, case))


@pytest.mark.parametrize("dtype", DTYPES)
@given(data=st.data())
def test_permuted_cache_same_attention(oimpl, dtype, data):
    case = data.draw(attention_cases(dtype), label="case")
    n = case.arrays["k"].shape[0]
    perm = np.random.default_rng(data.draw(st.integers(0, 2**16), label="perm seed")).permutation(n)
    chunks = data.draw(st.integers(1, 3), label="chunks")
    with covered():
        measured("attention", "permuted_cache", dtype, check_permuted_cache(oimpl, case, perm, chunks))
