"""Softmax: the float64 model of a row, and the entropy and masses computed from it.

Softmax is judged in two parts (``measure.check_softmax``, from ``softmax_model`` here): the ratios p_i / p_max against
exp(l_i - l_max), which no summation order touches (u·(|l_i - l_max| + exp_u + 2): the rounded argument,
expf's 4 u, two divisions), and the normaliser Σp - 1 against the contract's sum and quotient models.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .contracts import _ACTIVE, Contract, exp_u, log_error_u, quotient_u
from .nonnegative_sums import sum_bound
from .orders import ONLINE, TILE
from .units import FTZ_FLOOR, U32


@dataclass(frozen=True)
class SoftmaxModel:
    """The float64 softmax of a row as an implementation received it, and what fp32 may do to it."""

    p: np.ndarray
    d: np.ndarray
    """l_i - l_max (0 where l_i = -inf)."""
    finite: np.ndarray
    theta: float
    """Bound on the normaliser's relative error: |Σp^ - 1| and every p^_i's common factor."""
    elementwise_u: np.ndarray
    """Per-token relative error of p^_i apart from the normaliser, in u: the rounded argument
    (|d|), the contract's exp at d (``exp_u``), the division or reciprocal multiply (2)."""

    def rel(self) -> np.ndarray:
        """Relative error bound of each p^_i: elementwise part plus the normaliser's."""
        return U32 * self.elementwise_u + self.theta


def softmax_model(row64: np.ndarray, c: Contract | None = None) -> SoftmaxModel:
    """p, and θ: |Σp^ - 1| <= (sum_bound(e) + online_rescale_bound)/S (the order) + 2u·Σp(|d| + exp_u(d)) (an engine may
    compute e twice: once for the normaliser, once for the output, as online softmax does) + the
    contract's quotient (``quotient_u``: e / S, or e·r with r the contract's 1 / S, whose error
    every p^_i shares) + n·2^-126/… (outputs flushed to zero).

    The elementwise part keeps 2 u for the division: the divisor is one S per row, and the
    divisions engines run (IEEE, x·rcp(S), CUDA's div.approx / div.full, which scale by an
    approximate reciprocal of S) put S's error in a factor common to the row, so that the ratio
    p_i / p_max sees each quotient's own rounding only."""
    finite = np.isfinite(row64)
    if not finite.any():
        z = np.zeros(row64.size)
        return SoftmaxModel(z, z, finite, 0.0, z + 2.0)
    d = np.where(finite, row64 - row64[finite].max(), 0.0)
    e = np.where(finite, np.exp(d), 0.0)
    s = e.sum()
    p = e / s
    arg_exp = np.abs(d) + exp_u(d, c)
    theta = ((sum_bound(e, c) + online_rescale_bound(row64, e, c)) / s + 2 * U32 * float((p * arg_exp).sum())
             + quotient_u(c) * U32 + int(finite.sum()) * FTZ_FLOOR)
    return SoftmaxModel(p, d, finite, float(theta), arg_exp + 2)


def online_rescale_bound(row64: np.ndarray, e: np.ndarray, c: Contract | None = None) -> float:
    """What an online normaliser's rescales add to |Ŝ - S| (absolute, in the units of e = exp(d)),
    where the contract accepts the online order (``orders.ONLINE``: tiles of ``TILE`` tokens in token
    order): when a tile raises the running max, by Δ, the running sum is multiplied by exp(-Δ),
    whose error (``exp_u(Δ)``) and the product's rounding and the rounded argument (2) scale
    everything summed before the tile: u·Σ_rises (exp_u(Δ_j) + 2)·Σ_{tiles < j} e. Tiles of any
    multiple of ``TILE`` rescale at a subset of these boundaries, by the sum of their rises, over
    less mass, so the bound holds for them too. Order-free sums (``sum_bound``) do not see it: rows
    whose mass sits on slowly rising peaks, one per tile, have a few u of addition error and a
    rescale of nearly all of it per tile. 0 under contracts without the online order (strict)."""
    c = c or _ACTIVE[0]
    if ONLINE not in c.sums or row64.size <= TILE:
        return 0.0
    x = np.where(np.isfinite(row64), row64, -np.inf)
    pad = -x.size % TILE
    tiles = np.concatenate([x, np.full(pad, -np.inf)]).reshape(-1, TILE).max(axis=1)
    run = np.maximum.accumulate(tiles)
    rise = np.flatnonzero(run[1:] > run[:-1]) + 1
    rise = rise[np.isfinite(run[rise - 1])]  # a first finite tile rescales nothing
    if rise.size == 0:
        return 0.0
    mass = np.concatenate([[0.0], np.cumsum(np.concatenate([e, np.zeros(pad)]).reshape(-1, TILE).sum(axis=1))])
    delta = run[rise] - run[rise - 1]
    return float(U32 * ((exp_u(delta, c) + 2) * mass[rise]).sum())


def entropy_bound(m: SoftmaxModel, c: Contract | None = None) -> float:
    """|H^ - H| for H = -Σ p ln p computed in fp32 from the fp32 p^: each p^_i's relative error
    ρ_i moves its term by p_i·ρ_i·|ln p_i + 1|, logf adds p·log_error_u(ln p) per term (the
    contract's log: 2u·|ln p| strict), the product u·H, and the n-term sum of non-negative terms
    its ``sum_bound``."""
    p = m.p
    with np.errstate(divide="ignore"):
        lnp = np.where(p > 0, np.log(np.where(p > 0, p, 1.0)), 0.0)
    terms = -p * lnp
    h = float(terms.sum())
    logf = float((p * log_error_u(lnp, c=c)).sum())
    return float((p * m.rel() * np.abs(lnp + 1)).sum() + U32 * (h + logf) + sum_bound(terms, c))


def mass_bound(row64: np.ndarray, order: np.ndarray, k: int, c: Contract | None = None,
               model: SoftmaxModel | None = None) -> float:
    """How far an fp32 cumulative mass of the first ``k`` tokens of ``order`` may sit from the
    exact one: each p^_i within its relative bound (elementwise + normaliser), then the k-term
    sum of non-negative terms in any order ``c`` accepts (``sum_bound``)."""
    m = model or softmax_model(row64, c)
    idx = np.asarray(order)[:k]
    terms = m.p[idx]
    return float((terms * m.rel()[idx]).sum() + sum_bound(terms, c) + k * FTZ_FLOOR)
