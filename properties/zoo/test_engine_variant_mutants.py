"""The engine-variant mutants (``engine_variant_bugs.py``) hunted by the one runner with the
engine room's property table (``properties/engines/suite.py``), each kill replayed on gpu_impl,
which must pass it. Every mutant sits in a coverage gap of the engine functions: an argument
no test sent, an exact boundary, a chain judged only through logprobs, the law over seeds, a
stream that does not advance, a q = 0 draft, a module without a top-level softmax."""
from __future__ import annotations

import pytest

from properties.engines.suite import properties
from properties.zoo.engine_variant_bugs import MUTANTS
from properties.zoo.runner import Domain, hunt_and_replay

DOMAIN = Domain("engines", "gpu_impl", properties, MUTANTS)
_KILLS: dict[str, dict] = {}


@pytest.mark.parametrize("mutant", DOMAIN.mutants, ids=str)
def test_engine_variant_mutant_is_killed(backend, mutant):
    hunt_and_replay(mutant, DOMAIN, backend, "calibration_engine_variants", _KILLS)
