"""Attention and the KV cache: the engine step (RoPE, append, attend) against the oracle,
decode token by token == prefill for every prefix length, causality (future keys/values
replaced by other values, NaN or inf leave earlier outputs bit-identical), GQA == MHA with K/V
heads repeated, and a permuted cache with permuted positions.

Generated from ``properties.ops.suite.PROPERTIES`` (group "attention").
"""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from properties.ops.suite import property_params, run_property


@pytest.mark.parametrize("prop, dtype", property_params("attention"))
@given(data=st.data())
def test_attention_property(oimpl, prop, dtype, data):
    run_property(oimpl, prop, dtype, data)
