"""Per-request seed mutants, each hunted by the per-request-seed property
(``properties/engines/seeds.py``) and its kill replayed on gpu_impl, which must pass it:

- ``seeds_ignored_when_any_unseeded``: as soon as one row of the batch is unseeded, every row
  draws from the batch generator: a seeded row's token then depends on who shares its batch;
- ``equal_seeds_share_a_stream``: rows with the same seed share one generator, consumed in row
  order (the second row reads the next step's block): equal seeds and equal logits disagree, and a
  row's token depends on whether an earlier row has its seed."""
from __future__ import annotations

import types
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, find, settings
from hypothesis.errors import NoSuchExample

import gpu_impl.engines as base
from gpu_impl._array import as_logits
from gpu_impl.engines import seeded
from properties.backends import Impl
from properties.engines.seeds import FN, UNSEEDED, seed_cases, violation
from properties.profiles import WITNESS_SEARCH_PHASES

BUDGET = 200


def seeds_ignored_when_any_unseeded(logits: Any, seeds: Any, step: Any = 0, batch_seed: Any = UNSEEDED) -> Any:
    s = np.asarray(seeds.get() if hasattr(seeds, "get") else seeds, dtype=np.int64)
    if bool((s == UNSEEDED).any()):
        s = np.full_like(s, UNSEEDED)  # the batch generator for every row: the seeds are dropped
    return seeded.vllm_sample_seeded(logits, s, step, batch_seed)


def equal_seeds_share_a_stream(logits: Any, seeds: Any, step: Any = 0, batch_seed: Any = UNSEEDED) -> Any:
    s = np.asarray(seeds.get() if hasattr(seeds, "get") else seeds, dtype=np.int64)
    xp, x, _ = as_logits(logits)
    V = x.shape[1]
    u = seeded.row_uniforms(s, V, step, batch_seed)
    used: dict[int, int] = {}
    for b, seed in enumerate(s.tolist()):
        if seed != UNSEEDED:  # one generator per seed value, advanced by every row that has it
            u[b] = seeded.row_uniforms(np.array([seed]), V, int(step) + used.get(seed, 0))[0]
            used[seed] = used.get(seed, 0) + 1
    return base.vllm_sample(x, xp.asarray(u))


MUTANTS = {f.__name__: f for f in (seeds_ignored_when_any_unseeded, equal_seeds_share_a_stream)}
KILLS: dict[str, str] = {}


def _module(name: str) -> types.ModuleType:
    mod = types.ModuleType(f"{base.__name__}[{name}]")
    mod.__dict__.update({k: getattr(base, k) for k in base.__all__})
    mod.__dict__[FN] = MUTANTS[name]
    mod.__all__ = list(base.__all__)
    return mod


@pytest.mark.parametrize("name", list(MUTANTS))
def test_seed_mutant_is_killed(backend, name):
    mutant, reference = Impl(_module(name), backend), Impl(base, backend)
    search = settings(max_examples=BUDGET, derandomize=True, database=None, phases=WITNESS_SEARCH_PHASES,
                      deadline=None, suppress_health_check=list(HealthCheck))
    try:
        case = find(seed_cases(), lambda c: violation(mutant, c) is not None, settings=search)
    except NoSuchExample:
        pytest.fail(f"{name} survived {BUDGET} examples of the per-request-seed property")
    KILLS[name] = violation(mutant, case)
    print(f"{name} killed: {KILLS[name]}\nCASE {case}")
    why = violation(reference, case)
    assert why is None, f"the kill of {name} also fails gpu_impl: {why}\nCASE {case}"
