"""xtc(probability, threshold, min_keep, seed): "exclude top choices".

With chance <= probability (one float draw, only when enabled and size >= 2), drop every
token whose p >= threshold except the least probable of them.
"""
from __future__ import annotations

import numpy as np

from oracle.candidates import TokenDataArray
from oracle.rng import Mt19937, resolve_seed
from oracle.samplers.base import Empty, Sampler, check_finite


class Xtc(Sampler):
    name = "xtc"

    def __init__(self, probability: float, threshold: float, min_keep: int, seed: int) -> None:
        self.probability, self.threshold = float(probability), float(threshold)
        self.min_keep, self.seed = int(min_keep), seed
        self.reset()

    def reset(self) -> None:
        self.rng = Mt19937(resolve_seed(self.seed))

    def apply(self, cur: TokenDataArray) -> None:
        if self.probability <= 0 or self.threshold > 0.5 or cur.size < 2:
            return
        if self.rng.uniform_float() > self.probability:
            return
        apply_xtc_cut(cur, self.threshold, self.min_keep)


def apply_xtc_cut(cur: TokenDataArray, threshold: float, min_keep: int) -> None:
    """The deterministic part, once the draw said "cut"."""
    if not np.isfinite(cur.logits).any():
        return
    cur.softmax(do_sort=True)
    above = cur.p >= threshold
    # the last index of the leading run of p >= threshold (0 if the run is empty or length 1)
    run = int(np.argmin(above)) if not above.all() else cur.size
    pos_last = max(run - 1, 0)
    if cur.size - pos_last >= min_keep and pos_last > 0:
        cur.keep(slice(pos_last, cur.size))


def xtc(probability: float, threshold: float, min_keep: int = 0, seed: int = 0) -> Sampler:
    check_finite("xtc", probability=probability, threshold=threshold)
    if float(probability) <= 0 or float(threshold) > 0.5:
        return Empty("xtc")
    return Xtc(probability, threshold, min_keep, seed)
