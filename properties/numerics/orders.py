"""Summation orders: the γ index of a sum and of a scan, per order an implementation may choose.

Orders. A reduction of n terms errs by at most γ_d·Σ|x|, d the most roundings one term passes
through; d depends on the order an implementation legally chooses (``Order.depth``):
sequential n - 1 (CPU loops), pairwise/tree ⌈log2 n⌉ (NumPy, warp shuffles), blocked
⌈n/T⌉ - 1 + log2 T (T = 1,024 threads, strided in-order slices, then a tree), online
(⌈n/W⌉ - 1)·(2 + expf) + log2 W (W = 256-wide tiles, the running sum rescaled by an expf and a
multiply per tile), compensated 2 + n·u, wide (float64 accumulator) 1 + n·u64/u. Scans
(cumulative sums) have their own depths (``Order.scan_depth``). FMA or not, a dot product of K
terms is a reduction of K rounded products: depth + 1 (a fused multiply-add rounds once where
the product and the sum would round twice, so the unfused count bounds both).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from .units import FN_U, U32, U64, log2n

THREADS = 1024  # a CUDA block: the widest blocked reduction the default contract accepts
TILE = 256  # an online softmax's tile


@dataclass(frozen=True)
class Order:
    name: str
    depth: Callable[[int], float]
    """n terms -> the γ index of their sum."""
    scan_depth: Callable[[int], float]
    """n terms -> the γ index of any prefix of their inclusive scan."""


def _blocks(n: int, width: int) -> int:
    return -(-n // width)


SEQUENTIAL = Order("sequential", lambda n: max(n - 1, 0), lambda n: max(n - 1, 0))
PAIRWISE = Order("pairwise", lambda n: log2n(n) if n > 1 else 0, lambda n: 2 * log2n(n) if n > 1 else 0)
BLOCKED = Order("blocked",
                lambda n: _blocks(n, THREADS) - 1 + log2n(min(n, THREADS)) if n > 1 else 0,
                # thread-local run, a scan inside each warp and one across warps, two offset additions
                lambda n: _blocks(n, THREADS) - 1 + 2 * log2n(min(n, THREADS)) + 2 if n > 1 else 0)
ONLINE = Order("online",
               lambda n: (_blocks(n, TILE) - 1) * (2 + FN_U["exp"]) + log2n(min(n, TILE)) if n > 1 else 0,
               lambda n: (_blocks(n, TILE) - 1) * (2 + FN_U["exp"]) + 2 * log2n(min(n, TILE)) if n > 1 else 0)
# compensated: 2u + O(n·u²) (Knuth/Kahan), and never more than the additions it makes
COMPENSATED = Order("compensated", lambda n: min(2 + n * U32, n - 1) if n > 1 else 0,
                    lambda n: min(4 + n * U32, n - 1) if n > 1 else 0)
WIDE = Order("wide", lambda n: 1 + n * U64 / U32 if n > 1 else 0, lambda n: 1 + n * U64 / U32 if n > 1 else 0)

ALL_ORDERS = (SEQUENTIAL, PAIRWISE, BLOCKED, ONLINE, COMPENSATED, WIDE)
TREE_ORDERS = (PAIRWISE, COMPENSATED, WIDE)
