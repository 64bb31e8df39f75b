"""Property 1b: boundary conventions, where they are exactly observable.

On rows of 2^j equal logits (the rest -inf) with the boundary placed on a token
(``properties.boundaries``), the masses are exact and the catalogue allows no rounding: the
implementation must follow llama.cpp's >= or > to the token. Judged by the same body as
property 1 (``check_matches_oracle``), including the survivor count.
"""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from properties import recording
from properties.boundaries import BOUNDARY, exact_boundary_cases
from properties.catalogue import RECORDS_BY_NAME
from properties.checks import check_matches_oracle
from properties.helpers import covered


@pytest.mark.parametrize("record", [RECORDS_BY_NAME[n] for n in BOUNDARY], ids=str)
@given(data=st.data())
def test_boundary_convention_on_exact_masses(impl, record, data):
    case = data.draw(exact_boundary_cases(record, "float32"), label="case")
    with covered():
        check_matches_oracle(impl, record, case)
    recording.note(record.name, "exact_boundary", case.dtype)
