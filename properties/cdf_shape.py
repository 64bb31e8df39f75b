"""One CDF, one normaliser: an inverse-CDF ``dist`` judged on many uniforms of one large row.

A correct float32 dist may lay its CDF points C^_k off the exact C_k in two ways only:

* a common factor 1 + η, |η| <= θ: the normaliser, a float32 sum in any order the contract
  accepts (sequential included: at 262,144 tokens θ is up to 1.6 %), multiplies every point
  alike (p^ = e/S^), or cancels (llama.cpp's double S·u target);
* per prefix k, the weights' own errors Σ_{i<=k} p_i·ρ_i (ρ_i the contract's elementwise bound:
  the rounded argument, the exp form, the division) and a scan in an order the contract accepts
  for a CDF, γ_d·C_k (default: any, a float32 running total in token order included, as rand's
  ``WeightedIndex<f32>`` in candle and mistral.rs; strict: llama.cpp's double running sum).

So uniform u selecting token t (token order, the oracle's and llama.cpp's layout) means
u·s ∈ [C_{t-1} - E_{t-1}, C_t + E_t] for s = 1/(1 + η), and every uniform of the row must hold
for the *same* s. One uniform cannot tell a normaliser from a drift; a grid of them can: a CDF
that drifts with k beyond the accepted scan's γ_d (fp16 / bf16 sums, a float32 running total
under strict, where it stalls once a term is below half an ulp of the sum) is explained by no
single s, while its endpoint error alone may sit inside θ.

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
    n_tokens: int = 0
    """The row's candidates (for the law-level bound in ``describe``)."""

    @property
    def passed(self) -> bool:
        return self.ratio <= 1.0

    def describe(self) -> str:
        verdict = "PASS" if self.passed else "FAIL"
        text = (f"{verdict}: no common normaliser explains the {self.n} draws unless every CDF allowance grows "
                f"{self.ratio:.3g}x (normaliser θ = {self.theta:.3g}){': ' + self.worst if self.worst else ''}")
        if self.passed:
            return text
        if math.isinf(self.ratio):
            return f"{text}. Change: never return a token that is no candidate (a -inf logit has no CDF interval)."
        law = nm.dist_law(self.n_tokens) if self.n_tokens else None
        bound = f" (the contract's CDF moves one token by at most {law.per_token:.3g})" if law else ""
        return (f"{text}. Law: the CDF points sit up to {self.ratio:.3g}x their allowance off{bound}. Change: "
                f"invert one CDF of the row's own float32 weights, accumulated in float32 or wider (a running "
                f"total, a blocked scan, a double sum; not fp16 / bf16), against u times that CDF's own total.")


def uniforms(row64: np.ndarray) -> np.ndarray:
    """The row's uniforms, sorted and distinct in [0, 1): the stratified grid, the tail 1 - 2^-j,
    and points just past the most probable tokens (``AFTER_TOP``)."""
    m = nm.softmax_model(row64)
    upto = np.cumsum(m.p)
    top = np.argsort(-m.p, kind="stable")[:AFTER_TOP]
    after = [upto[t] + 2.0 ** -j * (1 - upto[t]) for t in top for j in AFTER_STEPS]
    u = np.concatenate([(np.arange(GRID) + 0.5) / GRID, 1 - 2.0 ** -np.asarray(TAIL, dtype=np.float64), after])
    return np.unique(u[(u >= 0) & (u < 1)])


LAYOUTS = ("token", "sorted")
"""The orders an inverse CDF may lay tokens out in: token order (llama.cpp's dist on a fresh
row, gpu_impl's dense rows) and descending logit (llama.cpp's dist after a sorting sampler, as in
its default chain); in sorted order equal logits are one interval, whatever order the sort left
them in (they weigh the same, so which of them a uniform lands on is no distribution error)."""


def _layout(row64: np.ndarray, layout: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(order: token ids in CDF order, group start, group end (exclusive) per position)."""
    n = row64.size
    if layout == "token":
        order = np.arange(n)
        return order, order, order + 1
    if layout != "sorted":
        raise ValueError(f"unknown layout {layout!r}; known: {', '.join(LAYOUTS)}")
    key = np.where(np.isfinite(row64), row64, -np.inf)
    order = np.lexsort((np.arange(n), -key))
    vals = key[order]
    new = np.concatenate([[True], vals[1:] != vals[:-1]])
    gid = np.cumsum(new) - 1
    starts = np.flatnonzero(new)
    ends = np.concatenate([starts[1:], [n]])
    return order, starts[gid], ends[gid]


def windows(row64: np.ndarray, c: nm.Contract | None = None, layout: str = "token"
            ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, float]:
    """Per token: (exact CDF below its interval, at its end, the allowance E below and at the end),
    and θ, for the CDF laid out in ``layout``."""
    c = c or nm.active_contract()
    m = nm.softmax_model(row64, c)
    order, start, end = _layout(row64, layout)
    p = m.p[order]
    cum = np.concatenate([[0.0], np.cumsum(p)])
    n = int(m.finite.sum())
    wcum = np.concatenate([[0.0], np.cumsum(p * U32 * m.elementwise_u[order])])
    scan = gamma(c.cdf_depth(n))
    err = wcum + scan * cum + n * FTZ_FLOOR
    below, upto, e_below, e_upto = (np.empty(row64.size) for _ in range(4))
    below[order], upto[order] = cum[start], cum[end]
    e_below[order], e_upto[order] = err[start], err[end]
    return below, upto, e_below, e_upto, m.theta


def judge(row64: np.ndarray, uniforms: np.ndarray, ids: np.ndarray, c: nm.Contract | None = None,
          layout: str = "token") -> OneCdf:
    """Is there one normaliser under which every (u, token) pair is a legal inverse-CDF draw from
    the CDF laid out in ``layout``?"""
    below, upto, err_below, err_at, theta = windows(row64, c, layout)
    ids = np.asarray(ids, dtype=np.int64)
    u = np.asarray(uniforms, dtype=np.float64)
    finite = np.isfinite(row64)
    if (ids < 0).any() or (ids >= row64.size).any() or not finite[ids].all():
        i = int(np.flatnonzero((ids < 0) | (ids >= row64.size) | ~finite[np.clip(ids, 0, row64.size - 1)])[0])
        return OneCdf(math.inf, u.size, theta, f"u = {u[i]:.9g} drew token {int(ids[i])}, which is no candidate")
    # past the engine's last CDF point it returns its last candidate of positive weight: the
    # last finite token, or one before it whose float32 weight may be the last not flushed to 0
    order = _layout(row64, layout)[0]
    position = np.empty(row64.size, dtype=np.int64)
    position[order] = np.arange(row64.size)
    d = np.where(finite, row64 - row64[finite].max(), -np.inf)
    live = position[(d > NORMAL_EXP)] if (d > NORMAL_EXP).any() else position[finite]
    fallback = position[ids] >= int(live.max())
    lo0, hi0 = below[ids], upto[ids]
    el, eh = err_below[ids], err_at[ids]

    def feasible(k: float) -> tuple[bool, int, int, float, float]:
        th = min(k * theta, 0.999)
        lo = (lo0 - k * el) / u
        hi = np.where(fallback, np.inf, (hi0 + k * eh) / u)
        i, j = int(np.argmax(lo)), int(np.argmin(hi))
        s_lo, s_hi = max(1 / (1 + th), float(lo[i])), min(1 / (1 - th), float(hi[j]))
        return s_lo <= s_hi * (1 + 4 * nm.U64), i, j, s_lo, s_hi

    ok, i, j, s_lo, s_hi = feasible(1.0)
    if ok:
        return OneCdf(_smallest(feasible, 0.0, 1.0), u.size, theta, "", int(finite.sum()))
    ratio = _smallest(feasible, 1.0, 2.0 ** 60)
    worst = (f"{layout} order: u = {u[i]:.9g} drew token {int(ids[i])} (exact CDF [{lo0[i]:.9g}, {hi0[i]:.9g}]): "
             f"the CDF scaled by >= {s_lo:.9g}; u = {u[j]:.9g} drew token {int(ids[j])} (exact CDF "
             f"[{lo0[j]:.9g}, {hi0[j]:.9g}]): by <= {s_hi:.9g}; allowed scale 1/(1 ± θ), points within "
             f"{eh[i]:.3g} / {eh[j]:.3g}")
    return OneCdf(ratio, u.size, theta, worst, int(finite.sum()))


def judge_any_layout(row64: np.ndarray, uniforms: np.ndarray, ids: np.ndarray,
                     c: nm.Contract | None = None) -> OneCdf:
    """The layout that explains the draws best (token or sorted order)."""
    return min((judge(row64, uniforms, ids, c, layout) for layout in LAYOUTS), key=lambda r: r.ratio)


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
