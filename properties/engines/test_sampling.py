"""Sampling rules with explicit noise: the exponential race (vLLM) and Gumbel-max (candle) each
sample their distribution, gated by the χ² gate (``properties.stats``: a correct sampler fails a
call with probability <= 1e-10; at N = max(POWER_N, sample_size(V)) a TVD-0.02 bias of any shape
fails with probability >= 99 % by design, measured in properties/meta/test_meta_stats.py).
They have no inverse CDF to drive, so the stratified grid cannot judge them. For the same
uniforms their token differs from inverse-CDF sampling's: recorded as data.

mistral.rs' ``WeightedIndex`` is an inverse CDF over its weights: judged exactly on the
stratified grid (``properties.stratified``), counts N·w_j/W ± (1 + 2Nκ).

candle's noise is a Gumbel truncated to [-2.78, 6.91] (U in [1e-7, 0.999)), so its law is the
oracle's quadrature ``candle.distribution``, not the softmax; the TVD between the two is recorded
(it is below the gate's effect floor, so only the exact law shows it).
"""
from __future__ import annotations

import numpy as np
import pytest

from oracle.engines import Settings
from oracle.engines import candle as o_candle
from oracle.engines import vllm as o_vllm
from oracle.engines.settings import inverse_cdf, softmax
from properties import recording
from properties.engines.records import engines_impl
from properties.failure import Failure
from properties.plugin import covered
from properties.stats import POWER_N, gof_samples, sample_size
from properties.stratified import GRID_N, cdf_error, grid_counts, judge_counts
from properties.samplers.strategies import make_logits

LAW = "engine draws follow their law"

CHUNK_ELEMENTS = 1_000_000
ORACLE_N = 20_000
ROWS = [("zipf", 64, 51, 0.8), ("peaked", 64, 52, 1.0), ("flat", 200, 53, 1.5), ("plateaus", 64, 54, 0.7)]
# (family, vocab, seed, t, top_k, top_p, min_p): the weights mistral.rs hands WeightedIndex
WEIGHT_ROWS = [("zipf", 500, 55, 0.8, 40, 0.95, 0.0), ("flat", 500, 56, 1.0, 0, 0.9, 0.0),
               ("peaked", 64, 57, 4.0, 0, 1.0, 0.02)]
TABLE: dict = {}


def _record(key: str, **values) -> None:
    TABLE[key] = values
    recording.table("engine_sampling_rules", TABLE)


def gate_n(probs: np.ndarray) -> int:
    """The gate's sample size for a law with this support (99 % power at TVD 0.02, any shape)."""
    return max(POWER_N, sample_size(int((probs > 0).sum())))


def _impl_draws(sub, fn: str, row: np.ndarray, t: float, n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """n draws of ``fn`` on copies of ``row`` with seeded uniforms; also the first uniform of each draw."""
    rng = np.random.default_rng(seed)
    per = max(1, CHUNK_ELEMENTS // row.size)
    ids, firsts = [], []
    for start in range(0, n, per):
        b = min(per, n - start)
        u = rng.random((b, row.size))
        x = np.repeat(row[None, :].astype(np.float32), b, axis=0)
        args = (x, u) if fn == "vllm_sample" else (x, np.full(b, t), u)
        ids.append(np.asarray(sub(fn, *args)))
        firsts.append(u[:, 0])
    return np.concatenate(ids), np.concatenate(firsts)


@pytest.mark.calls("vllm_sample")
@pytest.mark.parametrize("family, vocab, seed, t", ROWS)
def test_exponential_race_samples_the_softmax(impl, family, vocab, seed, t):
    row = make_logits(family, vocab, seed).astype(np.float64) / t
    probs = softmax(row)
    with covered():
        ids, u0 = _impl_draws(engines_impl(impl), "vllm_sample", row, t, gate_n(probs), seed)
    res = gof_samples(ids, probs)
    same = float(np.mean([inverse_cdf(probs, u) == i for u, i in zip(u0[:5000], ids[:5000])]))
    _record(f"vllm race:{family}/{vocab}/t{t}", N=res.n, p_value=res.p_value, tvd=round(res.tvd, 5),
            passed=res.passed, same_token_as_inverse_cdf=round(same, 4))
    if not res.passed:
        raise Failure(f"the exponential race does not sample softmax: {res.describe()}", property=LAW,
                      record="vllm_sample", case=f"make_logits({family!r}, {vocab}, {seed}) / {t}, uniforms seed {seed}",
                      category="distribution")
    assert same < 1.0, "the race chose the inverse-CDF token for every one of 5000 shared uniforms"


@pytest.mark.calls("candle_sample")
@pytest.mark.parametrize("family, vocab, seed, t", ROWS)
def test_candle_gumbel_samples_its_truncated_law(impl, family, vocab, seed, t):
    row = make_logits(family, vocab, seed).astype(np.float64)
    law = o_candle.distribution(row, Settings(temperature=t))
    soft = softmax(row / t)
    with covered():
        ids, u0 = _impl_draws(engines_impl(impl), "candle_sample", row, t, gate_n(law), seed)
    res = gof_samples(ids, law)
    vs_softmax = gof_samples(ids, soft)  # data: whether the gate alone would flag the truncation
    same = float(np.mean([inverse_cdf(soft, u) == i for u, i in zip(u0[:5000], ids[:5000])]))
    _record(f"candle gumbel:{family}/{vocab}/t{t}", N=res.n, p_value=res.p_value, tvd=round(res.tvd, 5),
            passed=res.passed, law_tvd_to_softmax=float(0.5 * np.abs(law - soft).sum()),
            gate_against_softmax=vs_softmax.describe(),
            unreachable_tokens=int(((law == 0) & (soft > 0)).sum()), same_token_as_inverse_cdf=round(same, 4))
    if not res.passed:
        raise Failure(f"candle's Gumbel-max does not sample its truncated-Gumbel law: {res.describe()}",
                      property=LAW, record="candle_sample", case=f"make_logits({family!r}, {vocab}, {seed}), T={t}, uniforms seed {seed}",
                      category="distribution")


@pytest.mark.parametrize("family, vocab, seed, t", ROWS[:2])
def test_oracle_rules_sample_the_softmax(family, vocab, seed, t):
    """The oracle's own rules: untruncated Gumbel-max and the race, each on fresh uniforms."""
    row = make_logits(family, vocab, seed).astype(np.float64)
    soft = softmax(row / t)
    rng = np.random.default_rng(seed)
    for rule, draw in (("gumbel-max (untruncated)", lambda u: o_candle.ideal_sample(row, t, u)),
                       ("exponential race", lambda u: o_vllm.race(soft, o_vllm.exponentials(u, vocab)))):
        ids = np.array([draw(rng.random(vocab)) for _ in range(ORACLE_N)])
        res = gof_samples(ids, soft)
        _record(f"oracle {rule}:{family}/{vocab}/t{t}", N=res.n, p_value=res.p_value, tvd=round(res.tvd, 5),
                passed=res.passed)
        if not res.passed:
            raise Failure(f"oracle {rule} does not sample softmax: {res.describe()}", property=LAW, record="oracle",
                          case=f"make_logits({family!r}, {vocab}, {seed}) / {t}, uniforms seed {seed}",
                          category="distribution")


@pytest.mark.calls("mistralrs_weights", "mistralrs_sample")
@pytest.mark.parametrize("family, vocab, seed, t, k, p, m", WEIGHT_ROWS)
def test_weighted_index_follows_its_weights(impl, family, vocab, seed, t, k, p, m):
    """mistral.rs' WeightedIndex on the stratified grid: token j drawn N·w_j/W ± (1 + 2Nκ) times.
    The weights are handed in, so κ is the accumulation alone: Rust's ``WeightedIndex<f32>``
    keeps float32 cumulative weights in token order (the ``sequential`` contract)."""
    row = make_logits(family, vocab, seed)[None, :]
    with covered():
        sub = engines_impl(impl)
        w = np.asarray(sub("mistralrs_weights", row, np.full((1, 1), -1), 1.0, 0.0, 0.0, t, k, p, m),
                       dtype=np.float32)[0]
        per = max(1, CHUNK_ELEMENTS // vocab)

        def sample(u: np.ndarray) -> np.ndarray:
            return np.concatenate([np.asarray(sub("mistralrs_sample", np.repeat(w[None, :], u[i:i + per].size, 0),
                                                  u[i:i + per])) for i in range(0, u.size, per)])

        probs = w.astype(np.float64) / w.astype(np.float64).sum()
        res = judge_counts(grid_counts(sample, vocab), probs, cdf_error(int((w > 0).sum()), "sequential"))
    _record(f"mistral.rs WeightedIndex:{family}/{vocab}/t{t}", N=res.n, test="stratified grid",
            worst_token=res.worst_token, count=res.worst_count, expected=round(res.worst_expected, 2),
            allowed=round(res.allowed, 3), passed=res.passed)
    if not res.passed:
        raise Failure(f"WeightedIndex does not follow its weights: {res.describe()}", property=LAW,
                      record="mistralrs_sample", case=f"make_logits({family!r}, {vocab}, {seed}), t={t}, k={k}, p={p}, min_p={m}",
                      category="distribution")


def test_candle_truncation_witness():
    """Two tokens 10 apart at T = 1: softmax gives the second 4.5e-5, candle never samples it."""
    row = np.array([0.0, -10.0])
    law = o_candle.distribution(row, Settings())
    soft = softmax(row)
    assert law[1] == 0.0 and soft[1] > 4e-5
    near = o_candle.distribution(np.array([0.0, -1.0]), Settings())
    _record("candle witness", logits=row.tolist(), softmax=soft.tolist(), candle=law.tolist(),
            gap1_softmax=float(softmax(np.array([0.0, -1.0]))[0]), gap1_candle=float(near[0]))
