"""The bug zoos: every mutant of every domain (samplers, ops, quants) must be killed by its domain's
own property bodies (``properties.zoo.runner.hunt``), and the unmutated gpu_impl must pass
exactly the (property, example) pairs that killed them (``control``: no false kill), and one
example of every property of the domain (``hunt`` on a module, as conforming implementations
will be judged).

The zoo mutates gpu_impl, whatever ``--impl`` names: it tests the suite, not the implementation
(on the ``--backend`` chosen). Each property runs at most the active profile's
``max_examples`` examples from a fixed seed, so examples-to-kill is the same number on every run
and a survivor fails here instead of hanging. The kill tables go to ``--lc-results`` as
``zoo_samplers``, ``zoo_ops`` and ``zoo_quants``.
"""
from __future__ import annotations

import functools

import pytest

from properties import recording
from properties.zoo import DOMAINS, domain
from properties.zoo.runner import Hunt, Mutant, assert_property_kill, control, hunt

_TABLES: dict[str, dict[str, dict]] = {}


@functools.cache
def _hunt(name: str, mutant: str, backend: str) -> Hunt:
    dom = domain(name)
    return hunt(next(m for m in dom.mutants if m.name == mutant), dom, backend=backend)


def _row(mutant: Mutant, found: Hunt) -> dict:
    kill = found.first_kill
    why = kill.why.split("\n") if kill else [""]
    return {"mutant": mutant.name, "description": mutant.description, "killed": kill is not None,
            "examples_to_kill": kill.examples_to_kill if kill else None, "killed_by": kill.property if kill else None,
            "survived": [f"{r.property} ({r.ran} examples)" for r in found.results if not r.killed],
            "why": why[0][:300], "witness": next((w for w in why if w.startswith("CASE")), "")[:400]}


@pytest.mark.parametrize("name, mutant", [pytest.param(d, m, id=f"{d}-{m.name}") for d in DOMAINS
                                          for m in domain(d).mutants])
def test_mutant_is_killed(backend, name: str, mutant: Mutant):
    found = _hunt(name, mutant.name, backend)
    table = _TABLES.setdefault(name, {})
    table[mutant.name] = _row(mutant, found)
    recording.table(f"zoo_{name}", [table[m.name] for m in domain(name).mutants if m.name in table])
    calls = "any function" if mutant.replaces is None else ", ".join(sorted(mutant.replaces))
    assert found.killed, (f"mutant {mutant.name} ({mutant.description}) survived every {name} property that calls "
                          f"{calls} ({found.budget} examples each): {[r.property for r in found.results]}")
    assert_property_kill(mutant.name, found.first_kill)


@pytest.mark.parametrize("name", DOMAINS)
def test_unmutated_impl_passes_every_kill(backend, name: str):
    """Control: gpu_impl as it is, on each (property, witness) pair that killed a mutant; a failure
    here means the suite kills correct code."""
    dom = domain(name)
    replays = control([_hunt(name, m.name, backend) for m in dom.mutants], dom, backend)
    false_kills = {r.property: r.why.split("\n")[0] for r in replays if r.killed}
    assert replays, f"the {name} zoo has no kill to replay"
    assert not false_kills, f"the unmutated gpu_impl fails the {name} zoo's kills: {false_kills}"


@pytest.mark.parametrize("name", DOMAINS)
def test_unmutated_impl_passes_every_property(backend, name: str):
    """``hunt``'s conforming-implementation mode, as other implementations plug in: every property
    of the domain, one example each, on gpu_impl as it is; nothing may fail."""
    dom = domain(name)
    found = hunt(dom.module, dom, budget=1, backend=backend)
    # every pinned corner, then one drawn example
    assert len(found.results) == len(dom.properties()) and all(r.ran == len(r.prop.first_examples()) + 1 for r in found.results)
    assert not found.killed, f"{found.first_kill.property} fails on gpu_impl: {found.first_kill.why[:500]}"
