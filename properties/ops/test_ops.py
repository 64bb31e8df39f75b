"""Ops: the implementation against the float64 oracle (one property per catalogue record) and
the per-op invariants (rms_norm scale invariance; RoPE pair norms, relative positions and
offsets; softcap shape; GELU tanh vs erf; log_softmax = log softmax), for every dtype.

Generated from ``properties.ops.suite.PROPERTIES`` (group "ops"). Errors are measured in
units of u against each record's model and recorded as histograms (max and percentiles).
"""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from properties.ops.suite import property_params, run_property


@pytest.mark.parametrize("prop, dtype", property_params("ops"))
@given(data=st.data())
def test_op_property(oimpl, prop, dtype, data):
    run_property(oimpl, prop, dtype, data)


def test_gelu_gap_constant_matches_the_oracle():
    """The gap the GELU property allows is what the oracle's two formulas actually differ by."""
    from oracle.ops.activations import gelu_tanh_erf_gap
    from properties.ops.checks import GELU_TANH_GAP

    gap = gelu_tanh_erf_gap()
    assert 0.999 * GELU_TANH_GAP <= gap <= GELU_TANH_GAP, gap
