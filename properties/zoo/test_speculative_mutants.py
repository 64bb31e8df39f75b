"""The speculative mutants (``near_threshold/speculative_bugs.py``) hunted by the one runner with
the speculative room's property table, each kill replayed on gpu_impl, which must pass it. The
sampler domain's hunt reaches only the sampler tables, so this domain is its own."""
from __future__ import annotations

import pytest

from properties.zoo.near_threshold.speculative_bugs import DOMAIN
from properties.zoo.runner import hunt_and_replay

_KILLS: dict[str, dict] = {}


@pytest.mark.parametrize("mutant", DOMAIN.mutants, ids=str)
def test_speculative_mutant_is_killed(backend, mutant):
    hunt_and_replay(mutant, DOMAIN, backend, "calibration_speculative", _KILLS)
