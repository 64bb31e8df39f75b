"""Exact distribution tests for inverse-CDF samplers: a stratified grid of uniforms.

An inverse-CDF sampler lays its tokens out in some order and returns the token whose CDF interval
holds the uniform u. Feed it the N uniforms u_i = (i + 1/2)/N (exact in binary for N a power of
two): a half-open interval of length L holds floor(NL) or ceil(NL) of them, wherever it sits. So
a sampler drawing token j with probability p_j returns it N·p_j ± 1 times, *whatever its order*.
No statistics are needed: a correct sampler passes with certainty, and a sampler whose probability
of some token is off by more than (2 + 2Nκ)/N fails with certainty.

Rounding (κ). The implementation's CDF points sit within κ of the exact ones, so each interval's
length is within 2κ of p_j and the judge allows |count_j - N·p_j| <= 1 + 2Nκ. κ has two parts,
both derived in units of u (properties.numerics):

* the weights. ``weights_error(row)`` = Σ|ê_i - e_i| / Σe_i for float32 weights
  ê_i = exp(fl(l_i - max)): the rounded argument moves exp by a factor e^{±u|l_i - max|}, the
  contract's exp adds ``numerics.exp_u`` u, and a result below the normal range may be flushed (FTZ_FLOOR absolute).
  The row sum is >= 1 (the maximal token weighs exp(0) = 1), so the weights' share of a CDF
  point is at most 2h/(1 - h). Zero for a sampler handed its weights (mistral.rs' WeightedIndex).
* the accumulation (``ACCUMULATIONS``), what a correct implementation may legally do:
  - ``double``: llama.cpp's dist and libstdc++'s discrete_distribution: double running sums of
    the weights against S·u; the normaliser cancels. 2γ_n(u64) + u64. What ``--contract strict``
    demands of dist.
  - ``blocked``: a GPU kernel: float32 probabilities e·(1/S) from a blocked normaliser, then a
    blocked float32 scan, T = 1,024 threads (each sums a run of ceil(n/T) in order, then a
    log2 T tree); a tree, Kahan or double accumulator is within the same bound. Relative
    (1 + u)²(1 + γ_k)/(1 - γ_k) - 1, k = ceil(n/T) + log2 T + 1.
  - ``sequential``: one float32 accumulator in token order (rand's ``WeightedIndex<f32>`` in
    candle and mistral.rs, a C loop): the same with k = n; at 262,144 tokens a CDF point may
    sit 1.6 % off (``numerics.dist_law``: total variation <= 1.6 %).
  The default contract accepts all of these (``numerics.DIST_CDF_DEFAULT``): with no accumulation
  named, κ is the largest over the contract's accepted CDF orders (``contract_accumulations``).

Power. A TVD-δ bias of any shape moves some token by at least 2δ/V, which fails for certain
once 2δ/V > (2 + 2Nκ)/N, i.e. V < δN/(1 + Nκ): at N = 2^16 and δ = 0.02, rows of up to ~1,100
tokens (2Nκ is 0.27-0.31 on the suite's 500-token rows); on longer rows, any bias that moves one
token by (2 + 2Nκ)/N.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from properties import numerics as nm
from properties.numerics import FTZ_FLOOR, U32, U64, exp_u, gamma

GRID_N = 2**16
BLOCK_THREADS = 1024


def grid(n: int = GRID_N) -> np.ndarray:
    """The stratified uniforms (i + 1/2)/n, i = 0..n-1 (float64; exact for n a power of two)."""
    if n < 1:
        raise ValueError(f"a grid needs at least one point, got n={n}")
    return (np.arange(n, dtype=np.float64) + 0.5) / n


def weights_error(row64: np.ndarray, roundings: int = 0) -> float:
    """h = Σ|ê_i - e_i| / Σ e_i for float32 weights ê_i = expf(fl(l_i - max)) of the finite logits,
    each then rounded ``roundings`` more times by a common factor (a float32 softmax's division,
    which a later renormalisation cancels up to that rounding)."""
    finite = np.isfinite(row64)
    if not finite.any():
        raise ValueError("the row has no finite logit: nothing to sample")
    d = np.abs(row64[finite] - row64[finite].max())
    e = np.exp(-d)
    with np.errstate(over="ignore", invalid="ignore"):
        # e^{u|d|} from the rounded argument, then expf, then the common roundings
        rel = (1 + exp_u(d) * U32) * (1 + U32) ** roundings * np.exp(U32 * d) - 1
        per = np.where(e > 0, e * rel, 0.0) + FTZ_FLOOR  # a result below the normal range may be flushed
    return float(per.sum() / e.sum())


def _blocked_depth(n: int, threads: int = BLOCK_THREADS) -> int:
    return -(-n // threads) + int(math.log2(threads)) + 1


def _relative(k: int) -> float:
    """e·(1/S) (two roundings), a normaliser and a scan each within γ_k."""
    g = gamma(k, U32)
    return (1 + U32) ** 2 * (1 + g) / (1 - g) - 1


ACCUMULATIONS: dict[str, Callable[[int], float]] = {
    "double": lambda n: 2 * gamma(n, U64) + U64,
    "blocked": lambda n: _relative(_blocked_depth(n)),
    "sequential": lambda n: _relative(n),
    "pairwise": lambda n: _relative(int(nm.PAIRWISE.scan_depth(n)) + 1),
    "compensated": lambda n: _relative(math.ceil(nm.COMPENSATED.scan_depth(n)) + 1),
}
ACCUMULATION_OF_ORDER = {nm.SEQUENTIAL: "sequential", nm.BLOCKED: "blocked", nm.PAIRWISE: "pairwise",
                         nm.COMPENSATED: "compensated", nm.WIDE: "double"}
"""The accumulation whose κ bounds a CDF scanned in each order of the numerics model."""


def contract_accumulations(c: nm.Contract | None = None) -> tuple[str, ...]:
    """The accumulations the contract accepts for dist's CDF (``Contract.cdf``)."""
    c = c or nm.active_contract()
    return tuple(dict.fromkeys(ACCUMULATION_OF_ORDER[o] for o in c.cdf))


# Whether a zero weight gets a zero-width CDF interval. A running sum (double or float32) adds 0
# and stays put, so such a token is never drawn. A blocked scan adds each run's offset, computed
# by a tree over run totals, to the run's own running sums: at a run boundary the offset differs
# from the previous run's last point by its reassociation, so the token there gets an interval of
# up to 2κ (measured: a finite past_fp16 token whose exp underflows, first in its run, drawn once
# in 65,536 at 262,144 tokens; nightly seed 0). A masked (-inf) token is never legal in any
# contract: it is no candidate.
ZERO_WIDTH: dict[str, bool] = {"double": True, "blocked": False, "sequential": True, "pairwise": False,
                               "compensated": False}


def cdf_error(n_terms: int, accumulation: str | None = None, weights: float = 0.0) -> float:
    """κ: how far a correct implementation's CDF point may sit from the exact one (no
    accumulation named: the largest the active contract accepts)."""
    if accumulation is None:
        return max(cdf_error(n_terms, a, weights) for a in contract_accumulations())
    if accumulation not in ACCUMULATIONS:
        raise ValueError(f"unknown accumulation {accumulation!r}; known: {', '.join(ACCUMULATIONS)}")
    if not 0 <= weights < 1:
        raise ValueError(f"weights error must lie in [0, 1), got {weights}")
    w = 2 * weights / (1 - weights)
    return (1 + w) * (1 + ACCUMULATIONS[accumulation](max(n_terms, 1))) - 1


@dataclass(frozen=True)
class GridResult:
    n: int
    allowed: float      # |count - N·p| allowed per token: 1 + 2Nκ
    worst_token: int
    worst_count: int
    worst_expected: float
    stray: int          # draws of tokens that may never be drawn
    passed: bool
    kappa: float = 0.0
    prob_error: float = 0.0
    """The largest |count/N - p| over tokens: one token's probability error as the grid sees it."""
    tv_at_least: float = 0.0
    """½·Σ max(0, |count - N·p| - 1)/N: the total variation the counts prove (a grid count is
    within 1 of N times its interval's length)."""

    @property
    def worst_excess(self) -> float:
        return abs(self.worst_count - self.worst_expected)

    def describe(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        stray = f"; {self.stray} draws of tokens that may never be drawn" if self.stray else ""
        head = (f"{verdict}: token {self.worst_token} drawn {self.worst_count} times of N={self.n} stratified "
                f"uniforms, N·p = {self.worst_expected:.2f}, allowed ± {self.allowed:.2f}{stray}")
        return head if self.passed else f"{head}. {self.law()} {self.change()}"

    def law(self) -> str:
        """The law-level effect: one token's probability error and the total variation shown."""
        return (f"Law: a token's probability off by {self.prob_error:.3g} (a CDF the contract accepts moves "
                f"one token by at most 2κ = {2 * self.kappa:.3g}); total variation >= {self.tv_at_least:.3g}.")

    def change(self) -> str:
        """What to change, read from how the draws fail."""
        if self.stray:
            return ("Change: a masked or zero-weight token must get an empty CDF interval (never return a token "
                    "whose weight is 0: at u = 0 too, search for the first running sum >= S·u among tokens of "
                    "positive weight).")
        return ("Change: invert the CDF of the row's own float32 weights, accumulated in float32 or wider (a "
                "running total, a blocked scan, a double sum; not fp16 / bf16), against u times that CDF's own "
                "total (or u with probabilities normalised by it).")


def never_drawn(row64: np.ndarray, accumulation: str | None = None) -> np.ndarray:
    """The tokens ``accumulation`` (default: every one the contract accepts) may never draw:
    masked ones, and where a zero weight has a zero-width interval (``ZERO_WIDTH``) those whose
    probability is 0 too."""
    masked = ~np.isfinite(row64)
    names = contract_accumulations() if accumulation is None else (accumulation,)
    return masked | (softmax64(row64) == 0) if all(ZERO_WIDTH[a] for a in names) else masked


def judge_counts(counts: np.ndarray, probs: np.ndarray, kappa: float, never: np.ndarray | None = None) -> GridResult:
    """counts[token] from the N grid uniforms against N·probs ± (1 + 2Nκ); a token in ``never``
    (default: probability 0) drawn at all fails."""
    c = np.asarray(counts, dtype=np.int64)
    p = np.asarray(probs, dtype=np.float64)
    if c.shape != p.shape or p.ndim != 1:
        raise ValueError(f"counts {c.shape} and probs {p.shape} must be 1-D of one length")
    if not np.isfinite(p).all() or (p < 0).any() or abs(math.fsum(p.tolist()) - 1) > 1e-9:
        raise ValueError("probs must be finite, non-negative and sum to 1")
    never = p == 0 if never is None else np.asarray(never, dtype=bool)
    n = int(c.sum())
    allowed = 1 + 2 * n * kappa
    excess = np.abs(c - n * p)
    stray = int(c[never].sum())
    j = int(np.argmax(np.where(never, np.where(c > 0, np.inf, 0.0), excess)))
    passed = stray == 0 and float(excess.max()) <= allowed
    tv = 0.5 * float(np.maximum(excess - 1, 0).sum()) / max(n, 1)
    return GridResult(n, allowed, j, int(c[j]), float(n * p[j]), stray, passed, kappa,
                      float(excess.max()) / max(n, 1), tv)


def grid_counts(sample: Callable[[np.ndarray], np.ndarray], vocab: int, n: int = GRID_N) -> np.ndarray:
    """counts[token] of ``sample(uniforms) -> ids`` over the grid (ids must lie in [0, vocab))."""
    ids = np.asarray(sample(grid(n)))
    if ids.shape != (n,) or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"the sampler returned {ids.dtype} ids of shape {ids.shape}, expected ({n},) integers")
    if ((ids < 0) | (ids >= vocab)).any():
        raise ValueError(f"token ids {np.unique(ids[(ids < 0) | (ids >= vocab)])[:8].tolist()} outside [0, {vocab})")
    return np.bincount(ids, minlength=vocab)


def softmax64(row64: np.ndarray) -> np.ndarray:
    """The float64 distribution of a row's finite logits (0 at -inf)."""
    finite = np.isfinite(row64)
    e = np.where(finite, np.exp(np.where(finite, row64, 0.0) - row64[finite].max()), 0.0)
    return e / e.sum()


def judge_logit_sampler(sample: Callable[[np.ndarray], np.ndarray], row64: np.ndarray,
                        accumulation: str | None = None, n: int = GRID_N, roundings: int = 0) -> GridResult:
    """An inverse-CDF sampler of softmax(row) (its own float32 weights) on the grid."""
    finite = int(np.isfinite(row64).sum())
    kappa = cdf_error(finite, accumulation, weights_error(row64, roundings))
    return judge_counts(grid_counts(sample, row64.size, n), softmax64(row64), kappa, never_drawn(row64, accumulation))
