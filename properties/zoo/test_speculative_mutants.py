"""The speculative mutants (``near_threshold/speculative_bugs.py``) hunted by the one runner with
the speculative room's property table, each kill replayed on gpu_impl, which must pass it. The
sampler domain's hunt reaches only the sampler tables, so this domain is its own.

Each mutant is hunted twice: with the room's corners (the examples every run visits first, among
them the boundary-tie shapes) and with drawn cases only, so a kill never rests on a hand-made
example alone."""
from __future__ import annotations

import dataclasses

import pytest

from properties.zoo.near_threshold.speculative_bugs import DOMAIN
from properties.zoo.runner import hunt_and_replay

DRAWN_ONLY = dataclasses.replace(DOMAIN, properties=lambda: [dataclasses.replace(p, corners=lambda point: ())
                                                             for p in DOMAIN.properties()])
_KILLS: dict[str, dict] = {}
_DRAWN_KILLS: dict[str, dict] = {}


@pytest.mark.parametrize("mutant", DOMAIN.mutants, ids=str)
def test_speculative_mutant_is_killed(backend, mutant):
    hunt_and_replay(mutant, DOMAIN, backend, "calibration_speculative", _KILLS)


@pytest.mark.parametrize("mutant", DRAWN_ONLY.mutants, ids=str)
def test_speculative_mutant_is_killed_by_drawn_cases(backend, mutant):
    hunt_and_replay(mutant, DRAWN_ONLY, backend, "calibration_speculative_drawn", _DRAWN_KILLS)
