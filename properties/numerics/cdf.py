"""The CDF an inverse-CDF dist inverts: how far a point of it may sit, and what that does to the law."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .contracts import _ACTIVE, Contract
from .orders import WIDE
from .softmax import SoftmaxModel, softmax_model
from .units import F32_TINY, FTZ_FLOOR, U32, U64, gamma


def cdf_bound(row64: np.ndarray, c: Contract | None = None, model: SoftmaxModel | None = None) -> float:
    """How far the CDF an inverse-CDF dist compares u with may sit from the exact one, at any
    token: the weights' elementwise errors and the normaliser (both relative to the CDF <= 1), and
    a scan in an order the contract accepts for a CDF. The normaliser may be any sum the contract
    accepts (torch's CPU softmax sums 8-16 lanes in order, 32,768 terms each at n = 262,144; the
    conforming torch_cpu member's dist picked a token ~50 past a window that held the normaliser to the CDF's orders, nightly): its error is a common
    factor of the whole CDF, θ at the CDF's top, so only a tree-order contract narrows it."""
    c = c or _ACTIVE[0]
    m = model or softmax_model(row64, c)
    n = int(m.finite.sum())
    live = m.p > F32_TINY
    elem = float(U32 * m.elementwise_u[live].max()) if live.any() else 0.0
    return 2 * elem + m.theta + gamma(c.cdf_depth(n)) + n * FTZ_FLOOR


@dataclass(frozen=True)
class DistLaw:
    """What an accepted CDF arithmetic may do to the law dist samples, at n candidates."""
    n: int
    point: float
    """κ: how far a CDF point may sit from the exact one (relative to the total; ``cdf_error``)."""
    per_token: float
    """The largest change of one token's probability: its interval's two ends, 2κ."""
    total_variation: float
    """A bound on the total variation distance to the exact law."""


def dist_law(n: int, c: Contract | None = None) -> DistLaw:
    """The law-level effect of the CDF arithmetic the contract accepts for dist, in probabilities.

    Any accepted order puts a CDF point within κ = γ_d of the exact one (d its scan depth), so one
    token's interval, and its probability, moves by at most 2κ. A running sum is tighter in total:
    ŝ_k = fl(ŝ_{k-1} + w_k) gives token k the interval ŝ_k - ŝ_{k-1} = w_k + δ_k·ŝ_k, |δ_k| <= u,
    so Σ_k |Δp_k| <= u·Σ_k Ĉ_k <= n·u, and the total variation is at most ½·n·u plus half the
    total's own error (κ at the top). Default contract (a float32 running total accepted), n =
    262,144: κ = 1.6 %, total variation <= 1.6 %; strict (llama.cpp's double sum): κ = 6e-8, total variation <= 3e-8."""
    c = c or _ACTIVE[0]
    n = max(int(n), 1)
    point = gamma(c.cdf_depth(n))
    unit = U64 if all(o is WIDE for o in c.cdf) else U32  # the running sum's own rounding unit
    return DistLaw(n, point, 2 * point, min(0.5 * n * unit + 0.5 * point, 1.0))
