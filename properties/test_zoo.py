"""The sampler bug zoo: every mutant in ``properties.zoo`` must be killed by the suite's own
property bodies (``properties.zoo.runner``), and the unmutated gpu_impl must survive exactly the
examples that killed them (no false kill).

The zoo mutates gpu_impl, whatever ``--impl`` names: it tests the suite, not the implementation.
Examples-to-kill is derandomized (same number on every run); each property stops after
``runner.CAP`` examples, so a survivor fails here instead of hanging. The kill table goes to
``--lc-results`` as ``zoo``.
"""
from __future__ import annotations

import pytest

from properties import recording
from properties.zoo import MUTANTS, Mutant
from properties.zoo.runner import CAP, control, hunt

_TABLE: dict[str, dict] = {}


@pytest.mark.parametrize("mutant", MUTANTS, ids=str)
def test_mutant_is_killed(impl, mutant: Mutant):
    kill = hunt(mutant.name, impl.backend)
    why = kill.why.split("\n")
    _TABLE[mutant.name] = {
        "mutant": mutant.name, "description": mutant.description, "killed": kill.examples is not None,
        "examples_to_kill": kill.examples, "killed_by": kill.prop,
        "survived": [f"{p} ({n} examples)" for p, n in kill.tried.items() if p != kill.prop],
        "why": why[0][:300], "witness": next((w for w in why if w.startswith("CASE")), "")[:400]}
    recording.table("zoo", [_TABLE[m.name] for m in MUTANTS if m.name in _TABLE])
    assert kill.examples is not None, (
        f"mutant {mutant.name} ({mutant.description}) survived every property that uses {mutant.replaces} "
        f"({CAP} examples each): {kill.tried}")


def test_unmutated_impl_survives_the_zoo_runner(impl):
    """Control: gpu_impl as it is, through every (property, vocabulary range) the mutants ran and
    for as many examples; a failure here means the suite kills correct code."""
    outcomes = control(impl.backend)
    false_kills = {name: o.why.split("\n")[0] for name, o in outcomes.items() if o.killed_at is not None}
    assert outcomes, "the control ran no property"
    assert not false_kills, f"the unmutated impl fails the zoo runner: {false_kills}"
