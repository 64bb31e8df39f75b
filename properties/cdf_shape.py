"""One CDF, one normaliser: an inverse-CDF ``dist`` judged on many uniforms of one large row.

A correct float32 dist may lay its CDF points C^_k off the exact C_k in two ways only:

* a common factor 1 + η, |η| <= θ: the normaliser, a float32 sum in any order the contract
  accepts (sequential included: at 262,144 tokens θ is up to 1.6 %), multiplies every point
  alike (p^ = e/S^), or cancels (llama.cpp's double S·u target);
* per prefix k, the weights' own errors Σ_{i<=k} p_i·ρ_i (ρ_i the contract's elementwise bound:
  the rounded argument, the exp form, the division) and a scan in an order the contract accepts
  for a CDF, γ_d·C_k (default: blocked over 1,024 threads, pairwise, compensated, wider).

So uniform u selecting token t (token order, the oracle's and llama.cpp's layout) means
u·s ∈ [C_{t-1} - E_{t-1}, C_t + E_t] for s = 1/(1 + η), and every uniform of the row must hold
for the *same* s. One uniform cannot tell a normaliser from a drift; a grid of them can: a
float32 running sum in token order drifts with k (it stalls once a term is below half an ulp of
the sum), which no single s explains, while its endpoint error alone sits inside θ.

The measure (``OneCdf.ratio``) is the smallest factor k by which every allowance (E and θ) must
grow for one s to exist: <= 1 passes, and a bug's ratio says how far past its bound it is.
Exact in the sense of the stratified grid: no statistics, a correct dist passes with certainty.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from properties import numerics as nm
from properties.numerics import FTZ_FLOOR, U32, gamma

GRID = 192  # stratified uniforms (i + 1/2)/GRID: a drift shows between any two of them
TAIL = tuple(range(6, 41, 2))  # u = 1 - 2^-j: the top of the CDF, where a stalled running sum ends
AFTER_TOP, AFTER_STEPS = 6, (2, 6, 10, 14, 18, 22)
"""u = C_t + 2^-j·(1 - C_t) just past each of the most probable tokens t: a float32 running sum
stalls after a spike (later terms below half an ulp of the sum are lost), and what it loses
lies there."""
NORMAL_EXP = math.log(float(np.finfo(np.float32).tiny))  # e^d below this may flush to 0


@dataclass(frozen=True)
class OneCdf:
    ratio: float
    """Smallest growth of the allowances that makes one normaliser explain every draw (<= 1: pass)."""
    n: int
    theta: float
    worst: str
    """The two draws that disagree most, in words (empty when it passes)."""

    @property
    def passed(self) -> bool:
        return self.ratio <= 1.0

    def describe(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        return (f"{verdict}: no common normaliser explains the {self.n} draws unless every CDF allowance grows "
                f"{self.ratio:.3g}x (normaliser θ = {self.theta:.3g}){': ' + self.worst if self.worst else ''}")


def uniforms(row64: np.ndarray) -> np.ndarray:
    """The row's uniforms, sorted and distinct in [0, 1): the stratified grid, the tail 1 - 2^-j,
    and points just past the most probable tokens (``AFTER_TOP``)."""
    m = nm.softmax_model(row64)
    upto = np.cumsum(m.p)
    top = np.argsort(-m.p, kind="stable")[:AFTER_TOP]
    after = [upto[t] + 2.0 ** -j * (1 - upto[t]) for t in top for j in AFTER_STEPS]
    u = np.concatenate([(np.arange(GRID) + 0.5) / GRID, 1 - 2.0 ** -np.asarray(TAIL, dtype=np.float64), after])
    return np.unique(u[(u >= 0) & (u < 1)])


def windows(row64: np.ndarray, c: nm.Contract | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray, float]:
    """(exact CDF below each token, at each token, each point's allowance E, θ), token order."""
    c = c or nm.active_contract()
    m = nm.softmax_model(row64, c)
    p = m.p
    upto = np.cumsum(p)
    below = np.concatenate([[0.0], upto[:-1]])
    n = int(m.finite.sum())
    weights = np.cumsum(p * U32 * m.elementwise_u)
    scan = gamma(c.cdf_depth(n))
    err_at = weights + scan * upto + n * FTZ_FLOOR
    return below, upto, err_at, m.theta


def judge(row64: np.ndarray, uniforms: np.ndarray, ids: np.ndarray, c: nm.Contract | None = None) -> OneCdf:
    """Is there one normaliser under which every (u, token) pair is a legal inverse-CDF draw?"""
    below, upto, err_at, theta = windows(row64, c)
    ids = np.asarray(ids, dtype=np.int64)
    u = np.asarray(uniforms, dtype=np.float64)
    finite = np.isfinite(row64)
    if (ids < 0).any() or (ids >= row64.size).any() or not finite[ids].all():
        i = int(np.flatnonzero((ids < 0) | (ids >= row64.size) | ~finite[np.clip(ids, 0, row64.size - 1)])[0])
        return OneCdf(math.inf, u.size, theta, f"u = {u[i]:.9g} drew token {int(ids[i])}, which is no candidate")
    # past the engine's last CDF point it returns its last candidate of positive weight: the
    # last finite token, or one before it whose float32 weight may be the last not flushed to 0
    d = np.where(finite, row64 - row64[finite].max(), -np.inf)
    surely_positive = np.flatnonzero(d > NORMAL_EXP)
    first_fallback = int(surely_positive[-1]) if surely_positive.size else int(np.flatnonzero(finite)[-1])
    err_below = np.concatenate([[0.0], err_at[:-1]])
    lo0, hi0 = below[ids], upto[ids]
    el, eh = err_below[ids], err_at[ids]
    fallback = ids >= first_fallback

    def feasible(k: float) -> tuple[bool, int, int, float, float]:
        th = min(k * theta, 0.999)
        lo = (lo0 - k * el) / u
        hi = np.where(fallback, np.inf, (hi0 + k * eh) / u)
        i, j = int(np.argmax(lo)), int(np.argmin(hi))
        s_lo, s_hi = max(1 / (1 + th), float(lo[i])), min(1 / (1 - th), float(hi[j]))
        return s_lo <= s_hi * (1 + 4 * nm.U64), i, j, s_lo, s_hi

    ok, i, j, s_lo, s_hi = feasible(1.0)
    if ok:
        return OneCdf(_smallest(feasible, 0.0, 1.0), u.size, theta, "")
    ratio = _smallest(feasible, 1.0, 2.0 ** 60)
    worst = (f"u = {u[i]:.9g} drew token {int(ids[i])} (exact CDF [{lo0[i]:.9g}, {hi0[i]:.9g}]): the CDF scaled "
             f"by >= {s_lo:.9g}; u = {u[j]:.9g} drew token {int(ids[j])} (exact CDF [{lo0[j]:.9g}, {hi0[j]:.9g}]): "
             f"by <= {s_hi:.9g}; allowed scale 1/(1 ± θ), points within {eh[i]:.3g} / {eh[j]:.3g}")
    return OneCdf(ratio, u.size, theta, worst)


def _smallest(feasible, lo: float, hi: float) -> float:
    """The least k in [lo, hi] with ``feasible(k)`` (monotone in k), by bisection in log space."""
    if feasible(lo)[0]:
        return lo
    if not feasible(hi)[0]:
        return math.inf
    for _ in range(60):
        mid = math.sqrt(lo * hi) if lo > 0 else hi / 2 ** 20
        if feasible(mid)[0]:
            hi = mid
        else:
            lo = mid
        if hi <= lo * (1 + 1e-3):
            break
    return hi
