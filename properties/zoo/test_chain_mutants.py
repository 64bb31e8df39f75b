"""The chain zoo (``properties/zoo/samplers/chain_bugs.py``) against the whole-chain judgement
(``properties.engines.chain_cases.judge``, the body of ``test_chains.py``):

- every mutant (each reordering of two adjacent stages, temperature first, each hand-off
  mistake) is killed by *drawn* cases within the test's drawn budget, corners left out;
- every mutant is killed by a pinned corner too;
- at each kill the failure names the mutant's own mistake (attribution);
- the correct chain passes every case that killed a mutant, and every corner.

The draws here come from the same strategy and budget as the whole-chain test, from this test's
own derandomized seed; the reference harnesses' founding-bug builds
(``properties/protocol/test_reference_harnesses.py``) are killed by the whole-chain test itself.
"""
from __future__ import annotations

import functools

import gpu_impl
import gpu_impl.engines
import pytest
from hypothesis import HealthCheck, Phase, given, settings

from properties import recording
from properties.engines.chain_cases import CORNERS, ChainCase, chain_cases, drawn_budget, judge
from properties.zoo.samplers.chain_bugs import CHAIN_MUTANTS, ChainMutant

_ROWS: dict[str, dict] = {}


class _Killed(Exception):
    pass


@functools.cache
def first_drawn_kill(name: str) -> tuple[int | None, ChainCase | None, str]:
    """(examples drawn up to the kill or None, the killing case, the failure) for mutant ``name``."""
    mutant = next(m for m in CHAIN_MUTANTS if m.name == name)
    chain, seen = mutant.build(gpu_impl), []

    @settings(max_examples=drawn_budget(), database=None, derandomize=True, deadline=None,
              phases=(Phase.generate,), suppress_health_check=list(HealthCheck))
    @given(cc=chain_cases())
    def hunt(cc: ChainCase) -> None:
        seen.append(cc)
        why = judge(chain, cc)
        if why is not None:
            raise _Killed(why)

    try:
        hunt()
    except _Killed as kill:
        return len(seen), seen[-1], str(kill)
    return None, None, ""


def _record(mutant: ChainMutant, **row) -> None:
    _ROWS.setdefault(mutant.name, {"mutant": mutant.name, "description": mutant.description}).update(row)
    recording.table("zoo_chains", [_ROWS[m.name] for m in CHAIN_MUTANTS if m.name in _ROWS])


@pytest.mark.parametrize("mutant", CHAIN_MUTANTS, ids=lambda m: m.name)
def test_chain_mutant_is_killed_by_draws(mutant: ChainMutant):
    n, cc, why = first_drawn_kill(mutant.name)
    _record(mutant, examples_to_kill=n, why=why[:300])
    assert n is not None, f"{mutant.name} ({mutant.description}) survived {drawn_budget()} drawn chain cases"


@pytest.mark.parametrize("mutant", CHAIN_MUTANTS, ids=lambda m: m.name)
def test_chain_mutant_is_named_at_its_kill(mutant: ChainMutant):
    n, cc, why = first_drawn_kill(mutant.name)
    assert n is not None, f"{mutant.name} was not killed by draws"
    assert any(f"behaves like {s}" in why or f"equally: {s}" in why or f", {s}" in why for s in mutant.says), \
        f"{mutant.name}'s failure does not name its mistake ({' / '.join(mutant.says)}): {why}"


@pytest.mark.parametrize("mutant", CHAIN_MUTANTS, ids=lambda m: m.name)
def test_chain_mutant_is_killed_by_a_corner(mutant: ChainMutant):
    chain = mutant.build(gpu_impl)
    killing = [i for i, cc in enumerate(CORNERS) if judge(chain, cc) is not None]
    _record(mutant, corners_killing=len(killing))
    assert killing, f"{mutant.name} passes every pinned chain corner"


def test_correct_chain_passes_every_kill_and_corner():
    """Control: the unmutated chain on each case that killed a mutant, and on every corner."""
    chain = gpu_impl.engines.llama_cpp_chain
    cases = list(CORNERS) + [cc for m in CHAIN_MUTANTS for cc in [first_drawn_kill(m.name)[1]] if cc is not None]
    bad = [(cc, why) for cc in cases if (why := judge(chain, cc)) is not None]
    assert not bad, f"the correct chain fails {len(bad)} of these cases, e.g. {bad[0][0]!r}: {bad[0][1]}"

