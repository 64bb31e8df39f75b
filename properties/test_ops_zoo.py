"""The ops bug zoo: every mutant in ``properties.ops_zoo`` must be killed by its property.

Each mutant runs its property under the active hypothesis profile (no database, so the count
is honest); the test fails if the property survives, or if the unmutated implementation fails
the shrunk witness too (a false kill). The number of examples hypothesis drew
before the first failure and the shrunk witness go to ``recording.table("ops_zoo", …)``.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from properties import recording
from properties.backends import load_impl
from properties import PropertyFailure
from properties.ops.suite import PROPERTIES_BY_NAME
from properties.ops_zoo import OP_MUTANTS, mutate

KILLS: dict[str, dict] = {}


@pytest.mark.parametrize("mutant", OP_MUTANTS, ids=lambda m: m.name)
def test_mutant_is_killed(oimpl, mutant):
    module = mutate(oimpl.module, mutant)
    target = load_impl(module.__name__, oimpl.backend, module)
    prop = PROPERTIES_BY_NAME[mutant.prop]
    seen = {"drawn": 0, "first_kill": None}

    @settings(database=None, report_multiple_bugs=False, suppress_health_check=[HealthCheck.function_scoped_fixture])
    @given(data=st.data())
    def search(data):
        example = data.draw(prop.draw(mutant.dtype), label="example")
        seen["drawn"] += 1
        try:
            with np.errstate(all="ignore"):  # the mutants overflow by design; the property judges
                prop.body(target, example)
        except PropertyFailure:
            seen["first_kill"] = seen["first_kill"] or seen["drawn"]
            seen["witness"] = example  # the last failure hypothesis runs is the shrunk one it reports
            raise

    with pytest.raises(PropertyFailure) as killed:
        search()
    # control: the unmutated implementation passes the witness, so the kill is the mutation's
    prop.body(oimpl, seen["witness"])
    witness = str(killed.value).split("\n")
    KILLS[mutant.name] = {"bug": mutant.bug, "property": mutant.prop, "dtype": mutant.dtype,
                          "examples_to_kill": seen["first_kill"], "why": witness[0][:300],
                          "witness": next((w for w in witness if w.startswith("CASE")), "")[:400]}
    recording.table("ops_zoo", KILLS)
