"""The speculative mutants (``near_threshold/speculative_bugs.py``) hunted by the one runner with
the speculative room's property table, each kill replayed on gpu_impl, which must pass it. The
sampler domain's hunt reaches only the sampler tables, so this domain is its own."""
from __future__ import annotations

import types

import pytest

from properties.speculative import PROPERTIES, USES
from properties.zoo.near_threshold.speculative_bugs import SPECULATIVE_MUTANTS
from properties.zoo.runner import Domain, Mutant, Property, hunt_and_replay, replaced, swapped


def _as_mutant(m) -> Mutant:
    def build(base: types.ModuleType) -> types.ModuleType:
        return swapped(base, m.name, **{m.replaces: m.build(base)})
    return Mutant(m.name, m.size, frozenset({m.replaces}), replaced(build))


DOMAIN = Domain(
    "speculative", "gpu_impl",
    lambda: [Property(p.name, USES, lambda _p=p, **kw: _p.draw(), p.body, p.max_examples, p.corners) for p in PROPERTIES],
    tuple(_as_mutant(m) for m in SPECULATIVE_MUTANTS))
_KILLS: dict[str, dict] = {}


@pytest.mark.parametrize("mutant", DOMAIN.mutants, ids=str)
def test_speculative_mutant_is_killed(backend, mutant):
    hunt_and_replay(mutant, DOMAIN, backend, "calibration_speculative", _KILLS)
