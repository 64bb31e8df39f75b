"""Self-test of the goodness-of-fit gate (properties/stats.py), seeded.

Sample counts are drawn with ``Generator.multinomial``: the counts of N independent draws from
p are Multinomial(N, p), so this is statistically identical to drawing N token ids, at O(V) cost.

- no false alarm: correct counts (drawn from the expected p) never fail. Each call's false-failure
  probability is <= ALPHA_PER_TEST = 1e-10, so even the full run (4,050 calls) fails by chance
  with probability <= 4.1e-7; the bulk is checked too: p < 0.01 in no more runs than a
  calibrated p-value allows (binomial upper 1e-7 quantile).
- power: counts from a distribution at TVD exactly 0.02 (shapes in perturbations.py) fail in
  >= 95 % of runs at POWER_N, the sample size test_distribution uses. For the weakest shape
  (temperature-like) the probability-order χ² alone has noncentrality >= 200 at N = 100,000
  against <= 171 needed for 99.5 % power: it misses a run with probability <= 3.4e-5 (flat/1000,
  from scipy.stats.ncx2), so the 95 % floor over >= 200 runs per shape never fails by chance
  (< 1e-6).
- mutant: an inverse-CDF sampler that accumulates its CDF in float16 is killed; the samples
  needed are measured.

The CI profile runs the counts below; the full counts run under the nightly profile only.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest
from scipy.stats import binom

from properties import recording
from properties.meta.perturbations import SHAPES, tvd
from properties.profiles import current_profile
from properties.stats import ALPHA_PER_TEST, POWER_N, GofGate, gof_counts, gof_samples
from properties.samplers.strategies import make_logits

SEED = 20240601
DELTA = 0.02
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


CI_DISTS = (("peaked", 10), ("peaked", 1000), ("flat", 10), ("flat", 1000), ("zipf", 10),
            ("zipf", 1000), ("zipf", 5000), ("plateaus", 200))
MORE_DISTS = (("flat", 5000), ("peaked", 5000), ("neg_inf", 1000), ("near_ties", 64),
              ("plateaus", 5000), ("zipf", 32000), ("one_finite", 100))
LEVELS = {
    "ci": Level("ci", CI_DISTS, (20_000, POWER_N), null_runs=25, power_runs=25),
    "full": Level("full", CI_DISTS + MORE_DISTS, (1_000, 20_000, POWER_N), null_runs=90, power_runs=90),
}


def level_param(name: str):
    marks = [pytest.mark.slow] if name == "full" else []
    return pytest.param(LEVELS[name], id=name, marks=marks)


def require_level(level: Level) -> None:
    if level.name == "full" and current_profile() != "nightly":
        reason = (f"full counts (4,050 correct runs, >= 1,000 power runs per shape) run under the nightly "
                  f"profile only; this is {current_profile()!r}")
        print(reason)
        pytest.skip(reason)


def record(level: Level, key: str, value) -> None:
    TABLE.setdefault(level.name, {})[key] = value
    recording.table("stats_gate", TABLE)


@pytest.mark.parametrize("level", [level_param("ci"), level_param("full")])
def test_no_false_alarm(level: Level) -> None:
    require_level(level)
    runs = alarms = small_p = 0
    witnesses = []
    for i, (family, vocab) in enumerate(level.dists):
        p = expected(family, vocab)
        for n in level.sizes:
            gate = GofGate(p, n)
            rng = np.random.default_rng([SEED, i, n])
            for counts in rng.multinomial(n, p, size=level.null_runs):
                res = gate.test(counts)
                runs += 1
                small_p += res.p_value < 0.01
                if not res.passed:
                    alarms += 1
                    witnesses.append(f"{family}/{vocab} N={n}: {res.describe()}")
    bulk_limit = int(binom.isf(1e-7, runs, 0.01))
    record(level, "false_alarm", {"runs": runs, "false_alarms": alarms, "alpha_per_test": ALPHA_PER_TEST,
                                  "runs_with_p_below_0.01": small_p, "allowed_p_below_0.01": bulk_limit})
    print(f"stats gate [{level.name}]: {alarms} false alarms in {runs} correct runs; p<0.01 in {small_p}")
    assert alarms == 0, "gate failed correct samples:\n" + "\n".join(witnesses[:5])
    assert small_p <= bulk_limit, (f"p-value anti-conservative: p < 0.01 in {small_p} of {runs} correct runs "
                                   f"(a calibrated p allows <= {bulk_limit} at 1e-7)")


@pytest.mark.parametrize("level", [level_param("ci"), level_param("full")])
def test_power_at_tvd(level: Level) -> None:
    require_level(level)
    caught: dict[str, list[int]] = {s: [0, 0] for s in SHAPES}
    missed = []
    for i, (family, vocab) in enumerate(level.dists):
        p = expected(family, vocab)
        gate = GofGate(p, POWER_N)
        for j, (shape, perturb) in enumerate(SHAPES.items()):
            try:
                q = perturb(p, DELTA)
            except ValueError:  # e.g. no temperature moves a one-token distribution by 0.02
                continue
            assert abs(tvd(p, q) - DELTA) < 1e-12
            rng = np.random.default_rng([SEED, 1, i, j])
            for counts in rng.multinomial(POWER_N, q / q.sum(), size=level.power_runs):
                res = gate.test(counts)
                caught[shape][0] += not res.passed
                caught[shape][1] += 1
                if res.passed:
                    missed.append(f"{shape} on {family}/{vocab}: {res.describe()}")
    power = {s: round(c / n, 4) for s, (c, n) in caught.items() if n}
    record(level, "power", {"N": POWER_N, "tvd": DELTA, "runs": {s: n for s, (_, n) in caught.items()},
                            "power": power})
    print(f"stats gate [{level.name}] power at TVD {DELTA}, N={POWER_N}: {power}")
    weak = {s: v for s, v in power.items() if v < 0.95}
    assert not weak, f"power below 95% for {weak}; first misses:\n" + "\n".join(missed[:5])


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
