"""Per-request seeds: a seeded row's token is the same whatever batch it is sampled in (alone, with
other rows reseeded or unseeded, permuted), and rows with equal seeds and equal logits agree
(``properties/engines/seeds.py``). The failure names the row, its seed and the two batch
compositions that disagree."""
from __future__ import annotations

import numpy as np
from hypothesis import given

from properties.engines.records import engines_impl
from properties.engines.seeds import FN, UNSEEDED, seed_cases, violation
from properties.failure import Failure
from properties.plugin import covered
from properties.samplers.strategies import make_logits


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
