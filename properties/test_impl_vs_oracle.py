"""Property 1: the implementation agrees with the float64 oracle, within the stated allowances."""
from hypothesis import given, strategies as st
import pytest

from properties import recording
from properties.catalogue import sampler_records
from properties.checks import check_matches_oracle
from properties.helpers import covered, params_for, record_cases


@pytest.mark.parametrize("record, dtype", params_for(sampler_records(impl_only=True)))
@given(data=st.data())
def test_impl_matches_oracle(impl, record, dtype, data):
    case = data.draw(record_cases(record, dtype), label="case")
    with covered():
        reports = check_matches_oracle(impl, record, case)
    recording.note(record.name, "impl_vs_oracle", dtype, max(reports, key=lambda r: r.ratio, default=None))
