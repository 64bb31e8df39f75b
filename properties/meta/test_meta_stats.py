"""Self-test of the goodness-of-fit gate (properties/stats.py), seeded.

Sample counts are drawn with ``Generator.multinomial``: the counts of N independent draws from
p are Multinomial(N, p), so this is statistically identical to drawing N token ids, at O(V) cost;
``GofGate.statistics`` judges many runs at once with the code ``test`` uses for one.

- no false alarm: correct counts (drawn from the expected p) never fail at the gate's level
  ALPHA_PER_TEST = 1e-10: the ci level judges 11,200 correct runs (fails by chance with
  probability <= 1.2e-6), the full level 90,000 (<= 9e-6).
- calibration, on the same runs: the combined p-value's tail, P[p < TAIL_ALPHA] <= TAIL_ALPHA,
  checked by the count of runs below it against its binomial upper 1e-6 quantile (ci: 11,200
  runs at 1e-3; full: 90,000 runs at 1e-3 and 1e-4); and each component's p-values (the three
  χ² and the extreme bin) are valid, P[p <= x] <= x for all x: a one-sided Kolmogorov-Smirnov test
  against the uniform at 1e-6 per component (the two-sided distance is recorded as data; the
  extreme bin is conservative by construction, so only the one-sided test is a criterion).
- power: counts from a distribution at TVD exactly 0.02 in each shape of perturbations.py fail
  in >= 95 % of runs at N = max(POWER_N, sample_size(support)), the sample size the gate's users
  take. The design power there is 99 % for the worst shape (random sign, whose χ² divergence is
  the Cauchy-Schwarz minimum 4·TVD²), so >= 200 runs per shape fall below 95 % by chance with
  probability <= 1e-5; the ordered shapes are caught in every run. The measured power per shape
  and distribution is recorded (``stats_gate`` table).
- mutant: an inverse-CDF sampler that accumulates its CDF in float16 is killed; the samples
  needed are measured.

The CI profile runs the counts below; the full counts run under the nightly profile only.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np
import pytest
from scipy.stats import binom, kstest

from properties import recording
from properties.meta.perturbations import SHAPES, tvd
from properties.profiles import current_profile
from properties.stats import (ALPHA_PER_TEST, COMPONENTS, POWER_N, GofGate, gof_counts, gof_samples,
                              sample_size)
from properties.samplers.strategies import make_logits

SEED = 20240601
DELTA = 0.02
TAIL_RATE = 1e-6  # each calibration check's own false-failure probability
CHUNK = 250       # runs judged per GofGate.statistics call (memory: CHUNK x V counts)
TABLE: dict = {}


def expected(family: str, vocab: int, seed: int = 1) -> np.ndarray:
    x = make_logits(family, vocab, seed).astype(np.float64)
    e = np.exp(x - x.max())
    return e / e.sum()


@dataclass(frozen=True)
class Level:
    name: str
    dists: tuple[tuple[str, int], ...]
    sizes: tuple[int, ...]
    null_runs: int    # per (distribution, N)
    power_runs: int   # per (distribution, shape)
    tail_alphas: tuple[float, ...]


CI_DISTS = (("peaked", 10), ("peaked", 1000), ("flat", 10), ("flat", 1000), ("zipf", 10),
            ("zipf", 1000), ("zipf", 5000), ("plateaus", 200))
MORE_DISTS = (("flat", 5000), ("peaked", 5000), ("neg_inf", 1000), ("near_ties", 64),
              ("plateaus", 5000), ("zipf", 32000), ("one_finite", 100))
LEVELS = {
    "ci": Level("ci", CI_DISTS, (20_000, POWER_N), null_runs=700, power_runs=25, tail_alphas=(1e-3,)),
    "full": Level("full", CI_DISTS + MORE_DISTS, (1_000, 20_000, POWER_N), null_runs=2_000, power_runs=90,
                  tail_alphas=(1e-3, 1e-4)),
}


def level_param(name: str):
    marks = [pytest.mark.slow] if name == "full" else []
    return pytest.param(LEVELS[name], id=name, marks=marks)


def require_level(level: Level) -> None:
    if level.name == "full" and current_profile() != "nightly":
        reason = (f"full counts (90,000 correct runs, >= 1,000 power runs per shape) run under the nightly "
                  f"profile only; this is {current_profile()!r}")
        print(reason)
        pytest.skip(reason)


def record(level: Level, key: str, value) -> None:
    TABLE.setdefault(level.name, {})[key] = value
    recording.table("stats_gate", TABLE)


def judged(gate: GofGate, q: np.ndarray, runs: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """(failed [runs], components [runs, 4]) of ``runs`` multinomial draws from q through the gate."""
    failed, comps = [], []
    for start in range(0, runs, CHUNK):
        st = gate.statistics(rng.multinomial(gate.n, q / q.sum(), size=min(CHUNK, runs - start)))
        failed.append(st.failed())
        comps.append(np.column_stack([st.components, st.p_value]))
    return np.concatenate(failed), np.concatenate(comps)


@functools.cache
def null_runs(level: Level) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Correct runs of every (distribution, N) of the level: (failed, p-values [runs, 5], labels)."""
    failed, pvals, labels = [], [], []
    for i, (family, vocab) in enumerate(level.dists):
        p = expected(family, vocab)
        for n in level.sizes:
            f, c = judged(GofGate(p, n), p, level.null_runs, np.random.default_rng([SEED, i, n]))
            failed.append(f)
            pvals.append(c)
            labels += [f"{family}/{vocab} N={n}"] * f.size
    return np.concatenate(failed), np.concatenate(pvals), labels


@pytest.mark.parametrize("level", [level_param("ci"), level_param("full")])
def test_no_false_alarm(level: Level) -> None:
    require_level(level)
    failed, _, labels = null_runs(level)
    record(level, "false_alarm", {"runs": int(failed.size), "false_alarms": int(failed.sum()),
                                  "alpha_per_test": ALPHA_PER_TEST,
                                  "chance_of_a_false_alarm": failed.size * ALPHA_PER_TEST})
    print(f"stats gate [{level.name}]: {int(failed.sum())} false alarms in {failed.size} correct runs")
    assert not failed.any(), f"gate failed correct samples: {[labels[i] for i in np.flatnonzero(failed)[:5]]}"


@pytest.mark.parametrize("level", [level_param("ci"), level_param("full")])
def test_p_value_tail_is_calibrated(level: Level) -> None:
    """P[p < a] <= a for the combined p-value, at a = 1e-3 (and 1e-4 in full)."""
    require_level(level)
    _, pvals, _ = null_runs(level)
    rows, bad = {}, []
    for a in level.tail_alphas:
        below, limit = int((pvals[:, -1] < a).sum()), int(binom.isf(TAIL_RATE, pvals.shape[0], a))
        rows[f"p<{a:g}"] = {"runs": int(pvals.shape[0]), "below": below, "expected_at_most": pvals.shape[0] * a,
                            "allowed": limit}
        if below > limit:
            bad.append(f"p < {a:g} in {below} of {pvals.shape[0]} correct runs (a calibrated p allows <= {limit})")
    record(level, "tail", rows)
    print(f"stats gate [{level.name}] tail: {rows}")
    assert not bad, "combined p-value anti-conservative: " + "; ".join(bad)


@pytest.mark.parametrize("level", [level_param("ci"), level_param("full")])
def test_component_p_values_are_valid(level: Level) -> None:
    """Each component's p-values are stochastically no smaller than uniform (one-sided KS)."""
    require_level(level)
    _, pvals, _ = null_runs(level)
    rows, bad = {}, []
    for j, name in enumerate(COMPONENTS):
        one = kstest(pvals[:, j], "uniform", alternative="greater")
        two = kstest(pvals[:, j], "uniform")
        rows[name] = {"runs": int(pvals.shape[0]), "D+": round(float(one.statistic), 4),
                      "p(D+)": float(one.pvalue), "two_sided_D": round(float(two.statistic), 4)}
        if one.pvalue < TAIL_RATE:
            bad.append(f"{name}: D+ = {one.statistic:.4f} (p = {one.pvalue:.2g})")
    record(level, "components_ks", rows)
    print(f"stats gate [{level.name}] component KS: {rows}")
    assert not bad, "component p-values smaller than uniform: " + "; ".join(bad)


@pytest.mark.parametrize("level", [level_param("ci"), level_param("full")])
def test_power_at_tvd(level: Level) -> None:
    require_level(level)
    caught: dict[str, list[int]] = {s: [0, 0] for s in SHAPES}
    table: dict[str, dict] = {}
    for i, (family, vocab) in enumerate(level.dists):
        p = expected(family, vocab)
        n = max(POWER_N, sample_size(int((p > 0).sum()), DELTA))
        gate = GofGate(p, n)
        row = table.setdefault(f"{family}/{vocab}", {"N": n})
        for j, (shape, perturb) in enumerate(SHAPES.items()):
            try:
                q = perturb(p, DELTA)
            except ValueError:  # e.g. no temperature moves a one-token distribution by 0.02
                continue
            assert abs(tvd(p, q) - DELTA) < 1e-12
            failed, _ = judged(gate, q, level.power_runs, np.random.default_rng([SEED, 1, i, j]))
            caught[shape][0] += int(failed.sum())
            caught[shape][1] += failed.size
            row[shape] = round(float(failed.mean()), 3)
    power = {s: round(c / n, 4) for s, (c, n) in caught.items() if n}
    record(level, "power", {"tvd": DELTA, "runs": {s: n for s, (_, n) in caught.items()}, "power": power,
                            "per_distribution": table})
    print(f"stats gate [{level.name}] power at TVD {DELTA}: {power}")
    weak = {s: v for s, v in power.items() if v < 0.95}
    assert not weak, f"power below 95% for {weak}: {table}"


# --- meaningless input is refused, impossible tokens fail -------------------------------------

GOOD = np.array([0.5, 0.25, 0.25])
BAD_INPUTS = {
    "negative prob": (lambda: gof_counts(np.array([5, 5, 5]), np.array([0.75, 0.5, -0.25])), "negative"),
    "NaN prob": (lambda: gof_counts(np.array([5, 5, 5]), np.array([0.5, np.nan, 0.5])), "NaN"),
    "sum != 1": (lambda: gof_counts(np.array([5, 5, 5]), np.array([0.5, 0.25, 0.25 + 2e-9])), "sum"),
    "zero samples (ids)": (lambda: gof_samples(np.array([], dtype=np.int64), GOOD), "zero samples"),
    "zero samples (counts)": (lambda: gof_counts(np.zeros(3, dtype=np.int64), GOOD), "zero samples"),
    "id outside vocab": (lambda: gof_samples(np.array([0, 3]), GOOD), "outside the vocabulary"),
    "negative id": (lambda: gof_samples(np.array([-1, 0]), GOOD), "outside the vocabulary"),
    "float ids": (lambda: gof_samples(np.array([0.0, 1.0]), GOOD), "integers"),
    "counts shape": (lambda: gof_counts(np.array([1, 2]), GOOD), "shape"),
}


@pytest.mark.parametrize("name", list(BAD_INPUTS))
def test_meaningless_input_raises(name: str) -> None:
    call, match = BAD_INPUTS[name]
    with pytest.raises(ValueError, match=match):
        call()


def test_impossible_token_fails_even_once() -> None:
    p = np.array([0.5, 0.5, 0.0])
    counts = np.array([50_000, 49_999, 1])
    res = gof_counts(counts, p)
    assert not res.passed and res.p_value == 0.0 and "probability 0" in res.reason, res.describe()
    assert gof_counts(np.array([50_000, 50_000, 0]), p).passed


# --- mutant: float16 CDF accumulation ----------------------------------------------------------

def dist_cdf(logits: np.ndarray, u: np.ndarray, acc: type) -> np.ndarray:
    """Inverse-CDF dist whose running sum of probabilities is kept in ``acc`` (float16: the mutant)."""
    x = logits.astype(np.float32)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    cdf = np.cumsum(p.astype(acc), axis=1, dtype=acc).astype(np.float32)
    return np.minimum((cdf < u[:, None]).sum(axis=1), x.shape[1] - 1)


def sample_rows(row: np.ndarray, n: int, seed: int, acc: type, chunk: int = 2048) -> np.ndarray:
    u = np.random.default_rng(seed).random(n)
    return np.concatenate([dist_cdf(np.broadcast_to(row, (len(c), row.size)), c, acc)
                           for c in np.array_split(u, -(-n // chunk))])


MUTANT_VOCAB = 4096  # zipf tail: past a running sum of 0.5 fp16 steps by 2^-11, most tail p's round away
LADDER = (25, 50, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000)


def test_fp16_cdf_mutant_is_killed() -> None:
    row = make_logits("zipf", MUTANT_VOCAB, 3)
    p = expected("zipf", MUTANT_VOCAB, 3)
    kill = None
    for n in LADDER:
        res = gof_samples(sample_rows(row, n, SEED + n, np.float16), p)
        if not res.passed:
            kill = (n, res)
            break
    control = gof_samples(sample_rows(row, LADDER[-1], SEED, np.float32), p)
    TABLE["fp16_cdf_mutant"] = {
        "vocab": MUTANT_VOCAB, "family": "zipf", "killed_at_N": kill and kill[0], "ladder": list(LADDER),
        "witness": kill and kill[1].reason, "fp32_control_passed": control.passed}
    recording.table("stats_gate", TABLE)
    print(f"fp16-CDF mutant killed at N={kill and kill[0]}; fp32 control: {control.describe()}")
    assert kill is not None, f"fp16-CDF mutant survived N up to {LADDER[-1]}"
    assert control.passed, "the same sampler with a float32 CDF must pass: " + control.describe()
