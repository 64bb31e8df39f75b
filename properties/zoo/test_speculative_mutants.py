"""The speculative mutants (``near_threshold/speculative_bugs.py``) hunted by the one runner with
the speculative room's property table, each kill replayed on gpu_impl, which must pass it. The
sampler domain's hunt reaches only the sampler tables, so this domain is its own."""
from __future__ import annotations

import types

import pytest

from properties import recording
from properties.speculative import PROPERTIES, USES
from properties.zoo.near_threshold.speculative_bugs import SPECULATIVE_MUTANTS
from properties.zoo.runner import Domain, Mutant, Property, control, default_budget, hunt, replaced


def _as_mutant(m) -> Mutant:
    def build(base: types.ModuleType) -> types.ModuleType:
        mod = types.ModuleType(f"{base.__name__}[{m.name}]")
        mod.__dict__.update({k: getattr(base, k) for k in base.__all__})
        mod.__dict__[m.replaces] = m.build(base)
        mod.__all__ = list(base.__all__)
        return mod
    return Mutant(m.name, m.size, frozenset({m.replaces}), replaced(build))


DOMAIN = Domain(
    "speculative", "gpu_impl",
    lambda: [Property(p.name, USES, lambda _p=p, **kw: _p.draw(), p.body, p.max_examples, p.corners) for p in PROPERTIES],
    tuple(_as_mutant(m) for m in SPECULATIVE_MUTANTS))
_KILLS: dict[str, dict] = {}


@pytest.mark.parametrize("mutant", DOMAIN.mutants, ids=str)
def test_speculative_mutant_is_killed(backend, mutant):
    found = hunt(mutant, DOMAIN, default_budget(), backend)
    replays = control(found, DOMAIN, backend)
    kill = found.first_kill
    _KILLS[mutant.name] = {"mutant": mutant.name, "size": mutant.description, "killed": kill is not None,
                           "killed_by": kill.property if kill else None,
                           "examples_to_kill": sum(r.ran for r in found.results) if kill else None,
                           "why": kill.why.splitlines()[0][:300] if kill else ""}
    recording.table("calibration_speculative", list(_KILLS.values()))
    print(_KILLS[mutant.name])
    assert kill is not None, f"{mutant.name} survived every speculative property"
    assert not any(r.killed for r in replays), f"the kill of {mutant.name} also fails gpu_impl: {replays[0].why[:300]}"
