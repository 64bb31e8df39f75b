"""Property 1 on each sampler's pinned hard corners (``properties/samplers/corners.py``): large
flat rows with a small p, all-tied rows, one finite token, and cuts placed just outside the
judge's own window, so every profile visits them (the zoo runner visits them first too)."""
from __future__ import annotations

import pytest

from properties import recording
from properties.plugin import covered
from properties.samplers.records import sampler_records
from properties.samplers.suite import IMPL_VS_ORACLE

POINTS = [pytest.param(r, d, i, id=f"{r.name}-{d}-{c.family[len('corner:'):].replace(' ', '_')}")
          for r in sampler_records(impl_only=True) for d in r.dtypes
          for i, c in enumerate(IMPL_VS_ORACLE.corners((r, d)))]


@pytest.mark.parametrize("record, dtype, index", POINTS)
def test_impl_matches_oracle_on_corner(impl, record, dtype, index):
    case = IMPL_VS_ORACLE.corners((record, dtype))[index]
    with covered():
        reports = IMPL_VS_ORACLE.body(impl, (record, dtype), case) or []
    recording.note(record.name, "impl_vs_oracle[corner]", dtype, max(reports, key=lambda r: r.ratio, default=None),
                   case)
