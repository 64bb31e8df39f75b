"""Per-request seeds: a seeded row's token is the same whatever batch it is sampled in (alone, with
other rows reseeded or unseeded, permuted), and rows with equal seeds and equal logits agree
(``properties/engines/seeds.py``). The failure names the row, its seed and the two batch
compositions that disagree. The law of the draws over seeds (χ² gate) and a seed's stream advancing
from step to step (a binomial bound on repeats) are judged on fixed rows."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given

from oracle.engines.settings import softmax
from properties.engines.records import engines_impl
from properties.engines.seeds import (FN, LAW_ROWS, STREAM_ALPHA, STREAM_SEEDS, STREAM_STEPS, STREAM_VOCAB, UNSEEDED,
                                      repeat_limit, repeated_steps, seed_cases, seeded_tokens, violation)
from properties.stats import POWER_N, gof_samples, sample_size
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


@pytest.mark.parametrize("family, vocab, seed, step", LAW_ROWS)
def test_draws_over_seeds_follow_the_softmax(impl, family, vocab, seed, step):
    """One row, one seed per draw (distinct seeds, the same step): the tokens follow softmax(row),
    judged by the χ² gate at N = max(POWER_N, sample_size(V)) (99 % power at TVD 0.02; a correct
    engine fails with probability <= 1e-10, ``properties.stats``). Seeds base..base + N, base
    fixed: the run repeats. Uniform noise in the race (argmax p/u) fails it."""
    row = make_logits(family, vocab, seed)
    probs = softmax(row.astype(np.float64))
    n = max(POWER_N, sample_size(int((probs > 0).sum())))
    with covered():
        ids = seeded_tokens(engines_impl(impl), row, np.arange(n, dtype=np.int64) + 10_000 * seed, step)
    res = gof_samples(ids, probs)
    if not res.passed:
        raise Failure(f"draws over seeds do not follow softmax: {res.describe()}", property="law over seeds",
                      record=FN, case=f"make_logits({family!r}, {vocab}, {seed}), seeds {10_000 * seed}.. +{n}, "
                                      f"step {step}", category="distribution")


def test_a_seeds_stream_advances_from_step_to_step(impl):
    """A seed's tokens at steps 0..S-1 on a flat row of 1,000 tokens: a repeat (the same token as
    the step before) has probability Σp² ≈ 1e-3 per pair, so over 200 seeds × 4 pairs more than
    ``repeat_limit`` repeats has probability <= 1e-10 for a correct engine; a stream that
    re-reads the same uniforms at every step repeats on every pair."""
    row = make_logits("flat", STREAM_VOCAB, 64)
    probs = softmax(row.astype(np.float64))
    seeds = np.arange(STREAM_SEEDS, dtype=np.int64) * 7919 + 1
    pairs = STREAM_SEEDS * (STREAM_STEPS - 1)
    with covered():
        n = repeated_steps(engines_impl(impl), row, seeds, STREAM_STEPS)
    limit = repeat_limit(probs, pairs)
    if n > limit:
        raise Failure(f"{n} of {pairs} (seed, step) pairs repeat the previous step's token; a correct stream "
                      f"repeats at most {limit} (P <= {STREAM_ALPHA:g}): the stream does not advance with the step",
                      property="stream advances", record=FN,
                      case=f"make_logits('flat', {STREAM_VOCAB}, 64), seeds {seeds[:3].tolist()}.., steps 0..{STREAM_STEPS - 1}")
