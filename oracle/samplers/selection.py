"""Selecting samplers: greedy and dist (inverse CDF over the current order)."""
from __future__ import annotations

import numpy as np

from oracle.candidates import TokenDataArray
from oracle.rng import Mt19937, resolve_seed
from oracle.samplers.base import Sampler


def _require_finite_candidate(name: str, cur: TokenDataArray) -> None:
    # llama.cpp returns data[0] (greedy) or data[size-1] (dist) for an all -inf or empty array;
    # the oracle refuses instead: no token is a correct answer there.
    if cur.size == 0 or not np.isfinite(cur.logits).any():
        raise ValueError(f"{name}: no candidate with a finite logit to select")


class Greedy(Sampler):
    """``selected`` = first maximal logit (strict >); p untouched, no reordering."""

    name = "greedy"

    def apply(self, cur: TokenDataArray) -> None:
        _require_finite_candidate(self.name, cur)
        cur.selected = int(np.argmax(cur.logits))


class Dist(Sampler):
    """Current llama.cpp dist: one double draw, first i with cumsum(e^(l-max)) >= S*u, in current order.

    Even a single candidate consumes a draw (since llama.cpp dd1ea5243). p is normalised in place.
    """

    name = "dist"

    def __init__(self, seed: int) -> None:
        self.seed = seed
        self.reset()

    def reset(self) -> None:
        self.rng = Mt19937(resolve_seed(self.seed))

    def apply(self, cur: TokenDataArray) -> None:
        _require_finite_candidate(self.name, cur)
        u = self.rng.uniform_double()
        e = np.exp(cur.logits - cur.logits.max())
        cur.selected = _first_reaching(e, u)
        cur.p = e / e.sum()


def select_inverse_cdf(logits: np.ndarray, u: float) -> int:
    """Index of the first entry whose running unnormalised mass reaches ``S·u``."""
    return _first_reaching(np.exp(logits - logits.max()), u)


def _first_reaching(e: np.ndarray, u: float) -> int:
    run = np.cumsum(e)  # non-decreasing (non-negative terms): a binary search finds the first
    return min(int(np.searchsorted(run, run[-1] * u, side="left")), e.size - 1)


def greedy() -> Sampler:
    return Greedy()


def dist(seed: int) -> Sampler:
    return Dist(seed)
