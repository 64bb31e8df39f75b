"""Goodness-of-fit gate: do sampled token ids follow the expected probabilities?

For laws with no inverse CDF to drive (vLLM's exponential race, candle's Gumbel-max, the
oracle's own mt19937 stream). An inverse-CDF sampler handed its uniforms is judged exactly by
``properties.stratified`` instead: no statistics, no false failures, certain detection.
``GofGate(probs, n).test(counts)`` (or ``gof_counts`` / ``gof_samples``) decides.

Bins. Zero-probability tokens are outside every bin: a sample there is an *impossible token*, an
immediate failure. The other tokens are binned three ways, because sampler bugs are coherent in
one of two orders or in none:
- by expected probability, heaviest first (a wrong temperature or renormalisation moves mass
  between heavy and light tokens), and by token id (an inverse-CDF sampler accumulates in id
  order, so a stalled low-precision prefix sum or a shifted block moves mass between id ranges).
  In each order consecutive tokens are merged greedily until a bin's expected count reaches
  ``e_min = max(MIN_EXPECTED, N / MAX_BINS)``: few enough bins (<= MAX_BINS + 1) that a smooth
  bias is not diluted over thousands of degrees of freedom. What is left at the end of the order
  (expected < e_min) stays a separate *rare* bin: pooling it into its neighbour would hide a bug
  that moves mass into a near-empty tail.
- per token: every token with expected count >= TOKEN_MIN_EXPECTED is its own bin, the rest one
  pooled bin. A bias coherent in neither order (each token up or down at random: probabilities
  rounded to a short format) cancels inside merged bins; only this statistic sees it.

Tests, per call, combined by Bonferroni into one ``p_value`` = min(1, 4 · min(p1, p2, p3, p4)):
p1, p2, p4: Pearson χ² over the bins of each order / the tokens (bins with expected >=
MIN_EXPECTED, conditional on the samples that fell in them). The tail probability is scipy's χ²
with Satterthwaite's correction: X²/c ~ χ²_ν with c = Var[X²] / (2(k - 1)), ν = (k - 1)/c and the
multinomial variance Var[X²] = 2(k - 1) + (Σ 1/q_b - k² - 2k + 2)/N. Uneven expected counts
inflate that variance (by 4 % on a zipf row at 5,000 tokens, N = 100,000), and the plain χ² tail
would then be anti-conservative (measured: p < 1e-4 in 1.5x as many correct runs as allowed).
p3: the most extreme merged bin of both orders, by its exact binomial tail, times the number of
bins. Each merged bin's count O also gets a standardised residual z = Φ⁻¹(1 - P[X >= O]) for an
excess and -Φ⁻¹(1 - P[X <= O]) for a deficit, X ~ Binomial(N, bin mass). Not (O - E)/sqrt(E): at
E = 5 a Poisson count is so skewed that P[(O - E)/sqrt(E) > 6] = 1.4e-6 against the normal 1e-9,
and Freeman-Tukey deviates fail the other way (an empty bin at E = 12.25 scores -6.07,
probability 4.8e-6). The exact-tail score makes |z| > 6 an event of probability <= 2e-9 per bin.

Verdict. ``passed`` is False iff an impossible token was sampled, or
    p_value < alpha   AND   (tvd > TVD_FLOOR  OR  max_residual > RESIDUAL_LIMIT
                             OR  divergence > DIVERGENCE_FLOOR),
tvd being the larger binned total-variation distance of the two orders (merging only shrinks a
TVD, so it is a lower bound on the token-level TVD, plus sampling noise), max_residual the
largest |z| and divergence the token component's estimate (X² - (k - 1))/N of the χ² divergence
Σ (q - p)²/p. The floors exist because with enough samples χ² flags effects far below anything
that matters (fp32 rounding of probabilities is ~1e-7 TVD); a failure must also be a large
effect. DIVERGENCE_FLOOR = 4·TVD_FLOOR²: by Cauchy-Schwarz a bias of TVD t has χ² divergence
>= 4t², so the floor never hides a bias the TVD floor would let through.

Error rates. ``FAMILY_ALPHA`` = 1e-6 is the probability that a correct implementation fails one
whole suite run (CI or nightly) because of this gate. Bonferroni over ``FAMILY_SIZE`` = 10,000 gate
calls (an upper bound on the calls one run makes to judge an implementation: about twenty, now
that inverse-CDF samplers are judged on the stratified grid) gives ``ALPHA_PER_TEST`` = 1e-10 per
call. The floors only remove failures, so they keep these bounds. That level rests on the χ² and
binomial tails above; properties/meta/test_meta_stats.py checks on correct runs that each
component's p-values are valid (one-sided KS against the uniform) and the combined p-value's
tail at 1e-3 (ci, 11,200 runs) and 1e-4 (nightly, 90,000 runs); those self-tests judge far more
runs than FAMILY_SIZE and state their own chance of failing.

Power. A bias of TVD t among tokens expected >= TOKEN_MIN_EXPECTED times has χ² divergence
>= 4t² (Cauchy-Schwarz), so the per-token χ² sees *every* shape once N·4t² clears its critical
value, which grows like sqrt(2·tokens): ``sample_size(tokens)`` is that N for 99 % power
(t = 0.02: 103,000 samples for 64 tokens, 152,000 for 200, 289,000 for 1,000). The gate's users
take N = max(POWER_N, sample_size(support)). Measured in properties/meta/test_meta_stats.py at
TVD 0.02 and that N: every shape coherent in an order (sharper, flatter, a shift onto the
lightest token, an id-order tail) fails in every run on every meta distribution, the random-sign
shape (the divergence minimum) in >= 99 % of runs. At a fixed N = 100,000 the random-sign shape
on 1,000 equiprobable tokens is missed in every run: no binning sees it, the per-token χ² needs
the samples above.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import brentq
from scipy.stats import binom, chi2, ncx2, norm

FAMILY_ALPHA = 1e-6       # P(a correct implementation fails one suite run because of this gate)
FAMILY_SIZE = 10_000      # gate calls one suite run may make (Bonferroni denominator)
ALPHA_PER_TEST = FAMILY_ALPHA / FAMILY_SIZE
MIN_EXPECTED = 5.0        # smallest expected count of a bin entering a χ² test
TOKEN_MIN_EXPECTED = 20.0  # a token is its own bin of the per-token χ² from this expected count
MAX_BINS = 64             # e_min grows to N / MAX_BINS, so each order has <= MAX_BINS + 1 bins
TVD_FLOOR = 0.01          # effect floor on the binned total-variation distance
RESIDUAL_LIMIT = 6.0      # effect floor on the largest |exact-tail z| of a bin
DIVERGENCE_FLOOR = 4 * TVD_FLOOR**2  # effect floor on the estimated χ² divergence (>= 4·TVD²)
SUM_TOLERANCE = 1e-9      # |sum(probs) - 1| allowed
POWER_N = 100_000         # the gate's smallest sample size (its users take max(POWER_N, sample_size(V)))
DESIGN_POWER = 0.99       # sample_size's target power; the meta tests assert >= 95 % measured
ORDERS = ("probability", "token id")
COMPONENTS = ("χ² probability order", "χ² token-id order", "extreme bin", "χ² per token")


def bonferroni_alpha(n_tests: int, family_alpha: float = FAMILY_ALPHA) -> float:
    """Per-test level keeping P(any false failure among n_tests) <= family_alpha."""
    if n_tests < 1:
        raise ValueError(f"n_tests must be >= 1, got {n_tests}")
    return family_alpha / n_tests


@dataclass(frozen=True)
class GofResult:
    statistic: float     # Pearson χ² of the order with the smaller χ² p-value
    dof: int             # its degrees of freedom (0: nothing for χ² to test)
    p_value: float       # Bonferroni-combined p-value of the four tests; 0.0 for an impossible token
    tvd: float           # binned total-variation distance, the larger of the two orders
    max_residual: float  # largest |exact-tail z| over all bins
    passed: bool
    reason: str          # why it failed, or why it passed
    n: int = 0
    bins: int = 0        # bins in both orders together
    alpha: float = ALPHA_PER_TEST
    divergence: float = 0.0  # per-token estimate of the χ² divergence, (X² - dof)/N
    components: tuple[float, ...] = ()  # the four p-values, in COMPONENTS order, before Bonferroni

    def describe(self) -> str:
        return (f"{'PASS' if self.passed else 'FAIL'}: {self.reason} [N={self.n}, {self.bins} bins, "
                f"chi2={self.statistic:.1f} on {self.dof} dof, p={self.p_value:.3g} (alpha {self.alpha:.1e}), "
                f"tvd={self.tvd:.4f} (floor {TVD_FLOOR}), max|z|={self.max_residual:.2f} (limit {RESIDUAL_LIMIT}), "
                f"divergence={self.divergence:.2e} (floor {DIVERGENCE_FLOOR:.0e})]")


def sample_size(tokens: int, tvd: float = 0.02, power: float = DESIGN_POWER, alpha: float = ALPHA_PER_TEST) -> int:
    """N at which the per-token χ² detects, with probability >= ``power``, every bias of
    total-variation distance ``tvd`` among ``tokens`` tokens each expected >= TOKEN_MIN_EXPECTED
    times, whatever its shape.

    Such a bias has χ² divergence >= 4·tvd² (Cauchy-Schwarz; equality for the random-sign shape),
    so the component's noncentrality is >= 4·N·tvd²; it is tested at alpha / 4 (Bonferroni)."""
    k = max(int(tokens), 2)
    crit = chi2.isf(alpha / len(COMPONENTS), k - 1)
    lam = brentq(lambda x: ncx2.sf(crit, k - 1, x) - power, 1e-6, 1e9)
    return int(math.ceil(lam / (4 * tvd * tvd)))


def validate_probs(probs: np.ndarray) -> np.ndarray:
    """The expected distribution as float64, or ValueError naming what makes it meaningless."""
    p = np.asarray(probs, dtype=np.float64)
    if p.ndim != 1 or p.size == 0:
        raise ValueError(f"probs must be a non-empty 1-D array, got shape {p.shape}")
    for bad, what in ((np.isnan(p), "NaN"), (np.isinf(p), "inf"), (p < 0, "negative values")):
        if bad.any():
            raise ValueError(f"probs contain {what} at token ids {np.flatnonzero(bad)[:8].tolist()}")
    total = math.fsum(p.tolist())
    if abs(total - 1.0) > SUM_TOLERANCE:
        raise ValueError(f"probs sum to {total!r}, not 1 within {SUM_TOLERANCE}")
    return p


def merge_bins(expected: np.ndarray, order: np.ndarray, e_min: float) -> np.ndarray:
    """Bin per token (-1 if not in ``order``): greedy runs along ``order`` reaching e_min each.

    The leftover run at the end of the order (expected < e_min) is the last bin, kept separate.
    """
    cum = np.cumsum(expected[order])
    bins = np.full(expected.size, -1, dtype=np.int64)
    start, base, k = 0, 0.0, 0
    while start < order.size:
        stop = int(np.searchsorted(cum, base + e_min, side="left")) + 1  # first run reaching e_min
        stop = min(stop, order.size)
        bins[order[start:stop]] = k
        base, start, k = cum[stop - 1], stop, k + 1
    return bins


def exact_tail(observed: np.ndarray, mass: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """Per bin: two-sided exact tail probability (capped at 1) and the signed normal score z."""
    # a bin holding (almost) all the mass can sum to 1 + 1 ulp; binom would return NaN there
    mass = np.clip(mass, 0.0, 1.0)
    upper = binom.sf(observed - 1, n, mass)   # P[X >= O]
    lower = binom.cdf(observed, n, mass)      # P[X <= O]
    excess = observed >= n * mass
    z = np.where(excess, np.maximum(norm.isf(upper), 0.0), -np.maximum(norm.isf(lower), 0.0))
    return np.minimum(1.0, 2 * np.where(excess, upper, lower)), z


def _chi2(obs: np.ndarray, exp: np.ndarray) -> tuple[np.ndarray, int, np.ndarray]:
    """Pearson χ² per run (rows of ``obs``) over the bins with expected >= MIN_EXPECTED, conditional
    on the run's total count in them: (statistic [R], dof, tail probability [R]), the tail from χ²
    with Satterthwaite's variance correction (module docstring)."""
    use = exp >= MIN_EXPECTED
    o, e = obs[:, use], exp[use]
    k = o.shape[1]
    if k < 2:
        return np.zeros(o.shape[0]), 0, np.ones(o.shape[0])
    n = o.sum(axis=1)
    live = n > 0
    n_safe = np.where(live, n, 1.0)[:, None]
    e = e[None, :] * (n_safe / e.sum())
    stat = np.where(live, ((o - e) ** 2 / e).sum(axis=1), 0.0)
    var = 2 * (k - 1) + ((n_safe / e).sum(axis=1) - k * k - 2 * k + 2) / n_safe[:, 0]
    c = np.maximum(var / (2 * (k - 1)), 1.0)  # never sharper than the plain χ² tail
    return stat, k - 1, np.where(live, chi2.sf(stat / c, (k - 1) / c), 1.0)


@dataclass(frozen=True)
class GateStatistics:
    """Everything the verdict reads, for R runs at once (one row of counts per run)."""
    components: np.ndarray  # [R, 4] p-values in COMPONENTS order, before Bonferroni
    p_value: np.ndarray     # [R] Bonferroni-combined
    tvd: np.ndarray
    max_residual: np.ndarray
    divergence: np.ndarray
    stray: np.ndarray       # [R] samples of probability-0 tokens
    chis: tuple             # (statistic [R], dof) per χ² component: probability, id, token
    obs: tuple              # merged-bin counts [R, bins] per order
    z: np.ndarray           # [R, bins of both orders]

    def failed(self, alpha: float = ALPHA_PER_TEST) -> np.ndarray:
        """The verdict per run (True = the gate fails it)."""
        big = (self.tvd > TVD_FLOOR) | (self.max_residual > RESIDUAL_LIMIT) | (self.divergence > DIVERGENCE_FLOOR)
        return (self.stray > 0) | ((self.p_value < alpha) & big)


class GofGate:
    """The gate for one expected distribution and sample size (bins computed once)."""

    def __init__(self, probs: np.ndarray, n: int) -> None:
        self.probs = validate_probs(probs)
        if int(n) < 1:
            raise ValueError(f"zero samples: nothing to test (n={n})")
        self.n = int(n)
        expected = self.n * self.probs
        support = np.flatnonzero(self.probs > 0)
        by_prob = support[np.argsort(-self.probs[support], kind="stable")]
        e_min = max(MIN_EXPECTED, self.n / MAX_BINS)
        self.bins = [merge_bins(expected, order, e_min) for order in (by_prob, support)]
        self.expected = [np.bincount(b[support], weights=expected[support]) for b in self.bins]
        # per token: each token at >= TOKEN_MIN_EXPECTED alone, the rest pooled in bin 0
        alone = support[expected[support] >= TOKEN_MIN_EXPECTED]
        self.token_bins = np.zeros(self.probs.size, dtype=np.int64)
        self.token_bins[alone] = np.arange(1, alone.size + 1)
        self.token_expected = np.bincount(self.token_bins[support], weights=expected[support],
                                          minlength=alone.size + 1)

    def _binned(self, c: np.ndarray, bins: np.ndarray, size: int) -> np.ndarray:
        """counts [R, V] summed into ``size`` bins (tokens of probability 0 left out): a cumulative
        sum over the tokens sorted by bin, differenced at the bin edges (empty bins give 0)."""
        live = np.flatnonzero(self.probs > 0)
        order = live[np.argsort(bins[live], kind="stable")]
        edges = np.searchsorted(bins[order], np.arange(size + 1))
        cs = np.concatenate([np.zeros((c.shape[0], 1), np.int64), np.cumsum(c[:, order], axis=1)], axis=1)
        return (cs[:, edges[1:]] - cs[:, edges[:-1]]).astype(np.float64)

    def statistics(self, counts: np.ndarray) -> GateStatistics:
        """The gate's statistics for each row of ``counts`` [R, V] (R runs, each summing to N)."""
        c = np.asarray(counts)
        if c.ndim != 2 or c.shape[1] != self.probs.size:
            raise ValueError(f"counts shape {c.shape} does not match probs shape {self.probs.shape}")
        if not np.issubdtype(c.dtype, np.integer) or (c < 0).any():
            raise ValueError("counts must be non-negative integers")
        if (c.sum(axis=1) != self.n).any():
            raise ValueError(f"counts sum to {c.sum(axis=1)[:4].tolist()}, the gate was built for N={self.n}")
        c = c.astype(np.int64)
        obs = tuple(self._binned(c, b, e.size) for b, e in zip(self.bins, self.expected))
        chis = [_chi2(o, e) for o, e in zip(obs, self.expected)]
        tails = [exact_tail(o, e / self.n, self.n) for o, e in zip(obs, self.expected)]
        p_bin = np.concatenate([t[0] for t in tails], axis=1)
        z = np.concatenate([t[1] for t in tails], axis=1)
        p_extreme = np.minimum(1.0, p_bin.shape[1] * p_bin.min(axis=1))
        per_token = _chi2(self._binned(c, self.token_bins, self.token_expected.size), self.token_expected)
        components = np.stack([chis[0][2], chis[1][2], p_extreme, per_token[2]], axis=1)
        stray = c[:, self.probs == 0].sum(axis=1)
        tvd = np.max([0.5 * (np.abs(o - e).sum(axis=1) + stray) / self.n for o, e in zip(obs, self.expected)], axis=0)
        return GateStatistics(
            components=components, p_value=np.minimum(1.0, len(COMPONENTS) * components.min(axis=1)), tvd=tvd,
            max_residual=np.abs(z).max(axis=1), divergence=(per_token[0] - per_token[1]) / self.n, stray=stray,
            chis=tuple((x[0], x[1]) for x in chis + [per_token]), obs=obs, z=z)

    def test(self, counts: np.ndarray, alpha: float = ALPHA_PER_TEST) -> GofResult:
        """Gate counts[token] (how often each token was sampled) against the expected probs."""
        c = np.asarray(counts)
        if c.shape != self.probs.shape:
            raise ValueError(f"counts shape {c.shape} does not match probs shape {self.probs.shape}")
        if not 0 < alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {alpha}")
        st = self.statistics(c[None, :])
        comps = tuple(float(x) for x in st.components[0])
        chi_p = (comps[0], comps[1], comps[3])
        i = int(np.argmin(chi_p))
        p_value, stray = float(st.p_value[0]), int(st.stray[0])
        common = dict(statistic=float(st.chis[i][0][0]), dof=int(st.chis[i][1]), tvd=float(st.tvd[0]),
                      max_residual=float(st.max_residual[0]), n=self.n, bins=int(st.z.shape[1]), alpha=alpha,
                      divergence=float(st.divergence[0]), components=comps)
        if stray:
            ids = np.flatnonzero((self.probs == 0) & (c > 0))[:8].tolist()
            return GofResult(p_value=0.0, passed=False, **common,
                             reason=f"sampled tokens of probability 0 ({stray} samples): ids {ids}")
        if bool(st.failed(alpha)[0]):
            if min(comps) == comps[3] and common["max_residual"] <= RESIDUAL_LIMIT:
                return GofResult(p_value=p_value, passed=False, **common, reason=(
                    f"distribution differs token by token (χ² {st.chis[2][0][0]:.1f} on {st.chis[2][1]} dof), "
                    f"coherent in neither the probability nor the id order"))
            return GofResult(p_value=p_value, passed=False, reason=self._worst([o[0] for o in st.obs], st.z[0]),
                             **common)
        if p_value < alpha:
            reason = "significant but below the effect floor (tvd, residual and divergence small)"
        elif common["bins"] <= 2:
            reason = "consistent (few bins: little beyond the support is testable at this N)"
        else:
            reason = "consistent with the expected distribution"
        return GofResult(p_value=p_value, passed=True, reason=reason, **common)

    def _worst(self, obs: list[np.ndarray], z: np.ndarray) -> str:
        i = int(np.argmax(np.abs(z)))
        which = 0 if i < obs[0].size else 1
        b = i - which * obs[0].size
        tokens = np.flatnonzero(self.bins[which] == b)
        shown = f"{tokens[:6].tolist()}{'...' if tokens.size > 6 else ''} ({tokens.size} tokens)"
        return (f"distribution differs; most extreme bin ({ORDERS[which]} order) holds tokens {shown}: "
                f"observed {obs[which][b]:.0f}, expected {self.expected[which][b]:.1f}, z={z[i]:.1f}")


def gof_counts(counts: np.ndarray, probs: np.ndarray, alpha: float = ALPHA_PER_TEST) -> GofResult:
    """Gate counts[token] against probs[token]."""
    c = np.asarray(counts)
    if not np.issubdtype(c.dtype, np.integer):
        raise ValueError(f"counts must be integers, got dtype {c.dtype}")
    return GofGate(probs, int(c.sum())).test(c, alpha)


def gof_samples(ids: np.ndarray, probs: np.ndarray, alpha: float = ALPHA_PER_TEST) -> GofResult:
    """Gate sampled token ids against probs; ids must be integers in [0, len(probs))."""
    p = validate_probs(probs)
    t = np.asarray(ids)
    if t.size == 0:
        raise ValueError("zero samples: nothing to test")
    if not np.issubdtype(t.dtype, np.integer):
        raise ValueError(f"token ids must be integers, got dtype {t.dtype}")
    bad = (t < 0) | (t >= p.size)
    if bad.any():
        raise ValueError(f"token ids {np.unique(t[bad])[:8].tolist()} are outside the vocabulary [0, {p.size})")
    return GofGate(p, t.size).test(np.bincount(t.ravel(), minlength=p.size), alpha)
