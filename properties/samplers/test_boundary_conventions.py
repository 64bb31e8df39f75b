"""Property 1b: boundary conventions, where they are exactly observable.

On rows of 2^j equal logits (the rest -inf) with the boundary placed on a token
(``properties.samplers.boundaries``), the masses are exact and the catalogue allows no rounding: the
implementation must follow llama.cpp's >= or > to the token. Exact because e^0 = 1 and a division
by 2^j is exact: in IEEE arithmetic by definition, for CUDA's fast-math ``__expf`` and reciprocal
an assumption ``properties/gpu/test_fast_math_premises.py`` measures on a device. Judged by the same body as
property 1 (``check_matches_oracle``), including the survivor count.
"""
from __future__ import annotations

import pytest
from hypothesis import given, strategies as st

from properties.samplers.records import RECORDS
from properties.samplers.suite import EXACT_BOUNDARY, run


@pytest.mark.parametrize("record", [r for r in RECORDS if EXACT_BOUNDARY.applies(r)], ids=str)
@given(data=st.data())
def test_boundary_convention_on_exact_masses(impl, record, data):
    run(impl, EXACT_BOUNDARY, record, "float32", data)
