"""Property 1: the implementation agrees with the float64 oracle, within the stated allowances."""
from hypothesis import given, strategies as st
import pytest

from properties.samplers.records import sampler_records
from properties.samplers.suite import IMPL_VS_ORACLE, params_for, run


@pytest.mark.parametrize("record, dtype", params_for(sampler_records(impl_only=True), prop=IMPL_VS_ORACLE))
@given(data=st.data())
def test_impl_matches_oracle(impl, record, dtype, data):
    run(impl, IMPL_VS_ORACLE, record, dtype, data)
