"""Goodness-of-fit gate: do sampled token ids follow the expected probabilities?

A sampler is correct in distribution when its token frequencies match the oracle's
probabilities. ``GofGate(probs, n).test(counts)`` (or ``gof_counts`` / ``gof_samples``) decides.

Bins. Zero-probability tokens are outside every bin: a sample there is an *impossible token*, an
immediate failure. The other tokens are binned twice, because sampler bugs are coherent in one of
two orders: by expected probability, heaviest first (a wrong temperature or renormalisation moves
mass between heavy and light tokens), and by token id (an inverse-CDF sampler accumulates in id
order, so a stalled low-precision prefix sum or a shifted block moves mass between id ranges).
In each order consecutive tokens are merged greedily until a bin's expected count reaches
``e_min = max(MIN_EXPECTED, N / MAX_BINS)``: at least 5, where the χ² approximation is customary,
and few enough bins (<= MAX_BINS + 1) that a smooth bias is not diluted over thousands of degrees
of freedom. What is left at the end of the order (expected < e_min) stays a separate *rare* bin:
pooling it into its neighbour would hide a bug that moves mass into a near-empty tail.

Tests, per call, combined by Bonferroni into one ``p_value`` = min(1, 3 · min(p1, p2, p3)):
p1, p2: Pearson χ² over the bins of each order with expected >= MIN_EXPECTED, conditional on the
samples that fell in them, dof = bins - 1, tail probability from scipy.stats.chi2;
p3: the most extreme bin of both orders, by its exact binomial tail, times the number of bins.
Each bin's count O also gets a standardised residual z = Φ⁻¹(1 - P[X >= O]) for an excess and
-Φ⁻¹(1 - P[X <= O]) for a deficit, X ~ Binomial(N, bin mass). Not (O - E)/sqrt(E): at E = 5 a
Poisson count is so skewed that P[(O - E)/sqrt(E) > 6] = 1.4e-6 against the normal 1e-9, and
Freeman-Tukey deviates fail the other way (an empty bin at E = 12.25 scores -6.07, probability
4.8e-6). The exact-tail score makes |z| > 6 an event of probability <= 2e-9 per bin at every E.

Verdict. ``passed`` is False iff an impossible token was sampled, or
    p_value < alpha   AND   (tvd > TVD_FLOOR  OR  max_residual > RESIDUAL_LIMIT),
tvd being the larger binned total-variation distance of the two orders (merging only shrinks a
TVD, so it is a lower bound on the token-level TVD, plus sampling noise) and max_residual the
largest |z|. The floor exists because with enough samples χ² flags effects far below anything
that matters (fp32 rounding of probabilities is ~1e-7 TVD); a failure must also be a large effect.

Error rates. ``FAMILY_ALPHA`` = 1e-6 is the probability that a correct implementation fails one
whole suite run (CI or nightly) because of this gate. Bonferroni over ``FAMILY_SIZE`` = 10,000 gate
calls (an upper bound on one run's calls, meta self-tests included) gives ``ALPHA_PER_TEST`` = 1e-10
per call. The effect floor only removes failures, so it keeps these bounds.

Blind spot, by construction: a perturbation incoherent in both orders (random tokens up, random
tokens down) is averaged away inside merged bins when N/V is small; no test at that N sees it.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.stats import binom, chi2, norm

FAMILY_ALPHA = 1e-6       # P(a correct implementation fails one suite run because of this gate)
FAMILY_SIZE = 10_000      # gate calls one suite run may make (Bonferroni denominator)
ALPHA_PER_TEST = FAMILY_ALPHA / FAMILY_SIZE
MIN_EXPECTED = 5.0        # smallest expected count of a bin entering a χ² test
MAX_BINS = 64             # e_min grows to N / MAX_BINS, so each order has <= MAX_BINS + 1 bins
TVD_FLOOR = 0.01          # effect floor on the binned total-variation distance
RESIDUAL_LIMIT = 6.0      # effect floor on the largest |exact-tail z| of a bin
SUM_TOLERANCE = 1e-9      # |sum(probs) - 1| allowed
POWER_N = 100_000         # sample size at which the meta tests certify >= 95 % power at TVD 0.02
ORDERS = ("probability", "token id")


def bonferroni_alpha(n_tests: int, family_alpha: float = FAMILY_ALPHA) -> float:
    """Per-test level keeping P(any false failure among n_tests) <= family_alpha."""
    if n_tests < 1:
        raise ValueError(f"n_tests must be >= 1, got {n_tests}")
    return family_alpha / n_tests


@dataclass(frozen=True)
class GofResult:
    statistic: float     # Pearson χ² of the order with the smaller χ² p-value
    dof: int             # its degrees of freedom (0: nothing for χ² to test)
    p_value: float       # Bonferroni-combined p-value of the three tests; 0.0 for an impossible token
    tvd: float           # binned total-variation distance, the larger of the two orders
    max_residual: float  # largest |exact-tail z| over all bins
    passed: bool
    reason: str          # why it failed, or why it passed
    n: int = 0
    bins: int = 0        # bins in both orders together
    alpha: float = ALPHA_PER_TEST

    def describe(self) -> str:
        return (f"{'PASS' if self.passed else 'FAIL'}: {self.reason} [N={self.n}, {self.bins} bins, "
                f"chi2={self.statistic:.1f} on {self.dof} dof, p={self.p_value:.3g} (alpha {self.alpha:.1e}), "
                f"tvd={self.tvd:.4f} (floor {TVD_FLOOR}), max|z|={self.max_residual:.2f} (limit {RESIDUAL_LIMIT})]")


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


def _chi2(obs: np.ndarray, exp: np.ndarray) -> tuple[float, int, float]:
    """Pearson χ² over bins with expected >= MIN_EXPECTED, conditional on their total count."""
    use = exp >= MIN_EXPECTED
    o, e = obs[use], exp[use]
    if o.size < 2 or o.sum() == 0:
        return 0.0, 0, 1.0
    e = e * (o.sum() / e.sum())
    stat = float(((o - e) ** 2 / e).sum())
    return stat, o.size - 1, float(chi2.sf(stat, o.size - 1))


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

    def test(self, counts: np.ndarray, alpha: float = ALPHA_PER_TEST) -> GofResult:
        """Gate counts[token] (how often each token was sampled) against the expected probs."""
        c = np.asarray(counts)
        if c.shape != self.probs.shape:
            raise ValueError(f"counts shape {c.shape} does not match probs shape {self.probs.shape}")
        if not np.issubdtype(c.dtype, np.integer) or (c < 0).any():
            raise ValueError("counts must be non-negative integers")
        if int(c.sum()) != self.n:
            raise ValueError(f"counts sum to {int(c.sum())}, the gate was built for N={self.n}")
        if not 0 < alpha < 1:
            raise ValueError(f"alpha must be in (0, 1), got {alpha}")
        c = c.astype(np.int64)
        live = self.probs > 0
        obs = [np.bincount(b[live], weights=c[live], minlength=e.size) for b, e in zip(self.bins, self.expected)]
        chis = [_chi2(o, e) for o, e in zip(obs, self.expected)]
        tails = [exact_tail(o, e / self.n, self.n) for o, e in zip(obs, self.expected)]
        p_bin = np.concatenate([t[0] for t in tails])
        z = np.concatenate([t[1] for t in tails])
        n_bins = int(p_bin.size)
        p_extreme = min(1.0, n_bins * float(p_bin.min()))
        stat, dof, p_chi = min(chis, key=lambda s: s[2])
        p_value = min(1.0, 3 * min(p_extreme, *(s[2] for s in chis)))
        stray = int(c[~live].sum())
        tvd = max(0.5 * (float(np.abs(o - e).sum()) + stray) / self.n for o, e in zip(obs, self.expected))
        max_res = float(np.abs(z).max())
        common = dict(statistic=stat, dof=dof, tvd=tvd, max_residual=max_res, n=self.n, bins=n_bins, alpha=alpha)
        if stray:
            ids = np.flatnonzero(~live & (c > 0))[:8].tolist()
            return GofResult(p_value=0.0, passed=False, **common,
                             reason=f"sampled tokens of probability 0 ({stray} samples): ids {ids}")
        if p_value < alpha and (tvd > TVD_FLOOR or max_res > RESIDUAL_LIMIT):
            return GofResult(p_value=p_value, passed=False, reason=self._worst(obs, z), **common)
        if p_value < alpha:
            reason = "significant but below the effect floor (tvd and residual small)"
        elif n_bins <= 2:
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
