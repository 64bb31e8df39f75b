"""The rounding error of a sum of non-negative terms, in any order a contract accepts.

Sums of non-negative terms (softmax normalisers, masses, sums of squares) get a sharper
order-free bound from the terms themselves (``sum_bound``; derivation in its docstring): tight
for peaked rows, where the worst case γ_{n-1}·S is millions of times too loose.
"""
from __future__ import annotations

import numpy as np

from .contracts import _ACTIVE, Contract
from .units import U32, gamma


def sum_bound(x: np.ndarray, c: Contract | None = None) -> float:
    """|fl(Σx) - Σx| for non-negative terms x (the float32 values, in float64), in any order
    ``c`` accepts: the smaller of γ_d·S (d = the contract's depth) and an order-free bound.

    Order-free bound: in any summation tree, the node adding partial sums A >= B rounds by at most
    min(u·(A + B), B) (A itself is a float within B of A + B), and the rounding errors add up.
    With S = Σx and t = u·S: a node whose smaller side is below t costs at most that side; a leaf
    x_j < t sits on the smaller side of such a node at most ⌊log2(t/x_j)⌋ + 1 times (each time its
    subtree at least doubles). The other nodes have both sides >= t and cost at most t each; they
    are the branchings of the tree above the minimal subtrees of sum >= t, which are disjoint and
    number at most n_big + τ/t (n_big terms >= t, τ the sum of the smaller ones). So
    |error| <= t·(n_big - 1) + τ + Σ_{x_j < t} x_j·(⌊log2(t/x_j)⌋ + 1), times (1 + γ_n) for
    computed partial sums. For a peaked softmax row that is a few u·S where γ_{n-1} is n·u·S.
    """
    c = c or _ACTIVE[0]
    x = np.asarray(x, dtype=np.float64)
    x = x[x > 0]
    n = x.size
    if n <= 1:
        return 0.0
    s = float(x.sum())
    worst = gamma(c.depth(n)) * s
    t = U32 * s
    small = x[x < t]
    n_big = n - small.size
    refined = t * max(n_big - 1, 0) + small.sum() + (small * (np.floor(np.log2(t) - np.log2(small)) + 1)).sum()
    return float(min(worst, refined * (1 + gamma(n))))
