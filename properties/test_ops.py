"""Ops: the implementation against the float64 oracle (one test per catalogue record and
dtype), and the per-op invariants. Errors are measured in units of u against each record's
model (``properties/catalogue/op_models.py``) and recorded as histograms (max, percentiles)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import assume, given, strategies as st

from properties import recording
from properties.catalogue.ops import OP_RECORDS_BY_NAME as OPS
from properties.ops_checks import (check_gelu_gap, check_log_softmax_is_log_softmax, check_matches_oracle,
                                   check_rms_scale_invariance, check_rope_offset, check_rope_pair_norms,
                                   check_rope_relative, check_softcap_shape)
from properties.ops_fill import fill
from properties.ops_helpers import covered, dtype_params, measured, oimpl, record_dtype_params  # noqa: F401
from properties.ops_strategies import norm_cases, rope_cases

DTYPES = dtype_params()


@pytest.mark.parametrize("record, dtype", record_dtype_params())
@given(data=st.data())
def test_op_matches_oracle(oimpl, record, dtype, data):
    case = data.draw(record.cases(dtype), label="case")
    with covered():
        measured(record.name, "impl_vs_oracle", dtype, check_matches_oracle(oimpl, record, case))


@pytest.mark.parametrize("dtype", DTYPES)
@given(case=st.data())
def test_rms_norm_scale_invariant(oimpl, dtype, case):
    c = case.draw(norm_cases("rms_norm", dtype), label="case")
    k = case.draw(st.integers(-8, 8), label="log2 c")
    x = c.arrays["x"].astype(np.float64)
    with np.errstate(over="ignore"):
        scaled = (x * 2.0**k).astype(c.arrays["x"].dtype).astype(np.float64)
    # the power of two must keep every stored input exact (no overflow, no subnormal loss)
    assume(np.array_equal(scaled, x * 2.0**k) and np.isfinite(scaled).all() and c.params["eps"] > 0)
    with covered():
        check_rms_scale_invariance(oimpl, c, k)
    recording.note("rms_norm", "scale_invariance", dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@given(data=st.data())
def test_rope_invariants(oimpl, dtype, data):
    case = data.draw(rope_cases(dtype), label="case")
    rng = np.random.default_rng(case.seed + 1)
    k = fill(rng, "normal", case.arrays["x"].shape, dtype)
    k_pos = case.arrays["positions"].astype(np.int64)[::-1].copy()
    shift = data.draw(st.sampled_from([1, 3, 1000, -int(min(k_pos.min(), case.arrays["positions"].min()))]), label="shift")
    s = data.draw(st.integers(0, case.arrays["x"].shape[0] - 1), label="offset")
    with covered():
        check_rope_pair_norms(oimpl, case)
        check_rope_relative(oimpl, case, k, k_pos, shift)
        check_rope_offset(oimpl, case, s)
    recording.note("rope", "invariants", dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@given(data=st.data())
def test_softcap_odd_bounded_near_identity(oimpl, dtype, data):
    case = data.draw(OPS["softcap"].cases(dtype), label="case")
    with covered():
        check_softcap_shape(oimpl, case)
    recording.note("softcap", "invariants", dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@given(data=st.data())
def test_gelu_tanh_within_known_gap_of_erf(oimpl, dtype, data):
    case = data.draw(OPS["gelu_tanh"].cases(dtype), label="case")
    with covered():
        check_gelu_gap(oimpl, case)
    recording.note("gelu", "tanh_vs_erf", dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@given(data=st.data())
def test_log_softmax_is_log_of_softmax(oimpl, dtype, data):
    case = data.draw(OPS["log_softmax"].cases(dtype), label="case")
    with covered():
        check_log_softmax_is_log_softmax(oimpl, case)
    recording.note("log_softmax", "log_of_softmax", dtype)


def test_gelu_gap_constant_matches_the_oracle():
    """The gap the GELU property allows is what the oracle's two formulas actually differ by."""
    from oracle.ops.activations import gelu_tanh_erf_gap
    from properties.ops_checks import GELU_TANH_GAP

    gap = gelu_tanh_erf_gap()
    assert 0.999 * GELU_TANH_GAP <= gap <= GELU_TANH_GAP, gap
