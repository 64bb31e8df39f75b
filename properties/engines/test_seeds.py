"""Per-request seeds: a seeded row's token is the same whatever batch it is sampled in (alone, with
other rows reseeded or unseeded, permuted), and rows with equal seeds and equal logits agree
(``properties/engines/seeds.py``). The failure names the row, its seed and the two batch
compositions that disagree. The law of the draws over seeds (χ² gate) and a seed's stream advancing
from step to step (a binomial bound on repeats) are judged on fixed rows."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given

from properties.engines.records import engines_impl
from properties.engines.seeds import (FN, LAW_ROWS, UNSEEDED, check_law_over_seeds, check_stream_advances, seed_cases,
                                      violation)
from properties.failure import Failure
from properties.plugin import covered
from properties.samplers.strategies import make_logits

pytestmark = pytest.mark.calls(FN)  # every test here judges the seeded sampler (properties/calls.py)


@given(case=seed_cases())
def test_a_seeded_row_ignores_the_rest_of_its_batch(impl, case):
    with covered():
        why = violation(engines_impl(impl), case)
    if why is not None:
        raise Failure(why, property="per-request seeds", record=FN, case=case)


def test_fresh_entropy_for_unseeded_rows_leaves_seeded_rows_alone(impl):
    """The default batch seed (-1: fresh OS entropy at every call, as vLLM's global generator):
    the unseeded rows may change from call to call, the seeded ones never do."""
    x = np.stack([make_logits("flat", 1000, r) for r in (1, 2, 3, 1)])
    seeds = np.array([7, UNSEEDED, UNSEEDED, 7], dtype=np.int64)
    with covered():
        sub = engines_impl(impl)
        alone = int(np.asarray(sub(FN, x[:1], seeds[:1]))[0])
        calls = [np.asarray(sub(FN, x, seeds)) for _ in range(3)]
    for i, ids in enumerate(calls):
        assert ids[0] == ids[3] == alone, \
            f"WHY  per-request seeds: row 0 and 3 (seed 7, equal logits) give {ids[0]}, {ids[3]} in call {i} " \
            f"of the batch with seeds {seeds.tolist()} and the default batch seed (-1, fresh entropy), {alone} alone"


@pytest.mark.parametrize("row", LAW_ROWS, ids=lambda r: f"{r[0]}-{r[1]}-step{r[3]}")
def test_draws_over_seeds_follow_the_softmax(impl, row):
    """One row, one seed per draw (distinct seeds, the same step): the tokens follow softmax(row)
    by the χ² gate (``seeds.check_law_over_seeds``: a correct engine fails with probability
    <= 1e-10). Uniform noise in the race (argmax p/u) fails it."""
    with covered():
        check_law_over_seeds(engines_impl(impl), row)


def test_a_seeds_stream_advances_from_step_to_step(impl):
    """A seed's tokens at consecutive steps repeat no more often than independent draws do
    (``seeds.check_stream_advances``: P <= 1e-10 for a correct engine)."""
    with covered():
        check_stream_advances(engines_impl(impl))
