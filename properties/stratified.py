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
    the weights against S·u; the normaliser cancels. 2γ_n(u64) + u64.
  - ``blocked``: a GPU kernel: float32 probabilities e·(1/S) from a blocked normaliser, then a
    blocked float32 scan, T = 1,024 threads (each sums a run of ceil(n/T) in order, then a
    log2 T tree); a tree, Kahan or double accumulator is within the same bound. Relative
    (1 + u)²(1 + γ_k)/(1 - γ_k) - 1, k = ceil(n/T) + log2 T + 1. The default contract.
  - ``sequential``: one float32 accumulator in token order (Rust's ``WeightedIndex<f32>``, a
    C loop): the same with k = n. At 262,144 tokens this allows a CDF shift of 3 %; it is a
    named, looser contract, never the default for ``dist``.

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
}
DEFAULT_ACCUMULATION = "blocked"
# Whether a zero weight gets a zero-width CDF interval. A running sum (double or float32) adds 0
# and stays put, so such a token is never drawn. A blocked scan adds each run's offset, computed
# by a tree over run totals, to the run's own running sums: at a run boundary the offset differs
# from the previous run's last point by its reassociation, so the token there gets an interval of
# up to 2κ (measured: a finite past_fp16 token whose exp underflows, first in its run, drawn once
# in 65,536 at 262,144 tokens; nightly seed 0). A masked (-inf) token is never legal in any
# contract: it is no candidate.
ZERO_WIDTH: dict[str, bool] = {"double": True, "blocked": False, "sequential": True}


def cdf_error(n_terms: int, accumulation: str = DEFAULT_ACCUMULATION, weights: float = 0.0) -> float:
    """κ: how far a correct implementation's CDF point may sit from the exact one."""
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

    @property
    def worst_excess(self) -> float:
        return abs(self.worst_count - self.worst_expected)

    def describe(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        stray = f"; {self.stray} draws of tokens that may never be drawn" if self.stray else ""
        return (f"{verdict}: token {self.worst_token} drawn {self.worst_count} times of N={self.n} stratified "
                f"uniforms, N·p = {self.worst_expected:.2f}, allowed ± {self.allowed:.2f}{stray}")


def never_drawn(row64: np.ndarray, accumulation: str = DEFAULT_ACCUMULATION) -> np.ndarray:
    """The tokens ``accumulation`` may never draw: masked ones, and where a zero weight has a
    zero-width interval (``ZERO_WIDTH``) those whose probability is 0 too."""
    masked = ~np.isfinite(row64)
    return masked | (softmax64(row64) == 0) if ZERO_WIDTH[accumulation] else masked


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
    return GridResult(n, allowed, j, int(c[j]), float(n * p[j]), stray, passed)


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
                        accumulation: str = DEFAULT_ACCUMULATION, n: int = GRID_N, roundings: int = 0) -> GridResult:
    """An inverse-CDF sampler of softmax(row) (its own float32 weights) on the grid."""
    finite = int(np.isfinite(row64).sum())
    kappa = cdf_error(finite, accumulation, weights_error(row64, roundings))
    return judge_counts(grid_counts(sample, row64.size, n), softmax64(row64), kappa, never_drawn(row64, accumulation))
