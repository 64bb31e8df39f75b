"""temp(t) and temp_ext(t, delta, exponent) (entropy-based dynamic temperature)."""
from __future__ import annotations

import math

import numpy as np

from oracle.candidates import TokenDataArray
from oracle.samplers.base import Empty, Sampler, check_finite


def apply_temperature(cur: TokenDataArray, t: float) -> None:
    """``temp_impl``: l/t, or for t <= 0 keep the first maximal logit and set the rest to -inf."""
    if cur.size == 0:
        return
    if t <= 0:
        first_max = int(np.argmax(cur.logits))
        keep = cur.logits[first_max]
        cur.logits = np.full(cur.size, -np.inf)
        cur.logits[first_max] = keep
        return
    cur.logits = cur.logits / t


class Temp(Sampler):
    name = "temp"

    def __init__(self, t: float) -> None:
        self.t = float(t)

    def apply(self, cur: TokenDataArray) -> None:
        apply_temperature(cur, self.t)


class TempExt(Sampler):
    """delta > 0: T = t - delta + 2·delta·(H/ln n)^exponent over the current candidates."""

    name = "temp-ext"

    def __init__(self, t: float, delta: float, exponent: float) -> None:
        self.t, self.delta, self.exponent = float(t), float(delta), float(exponent)

    def apply(self, cur: TokenDataArray) -> None:
        if self.delta <= 0:
            apply_temperature(cur, self.t)
            return
        if cur.size <= 1:
            return
        min_t, max_t = max(0.0, self.t - self.delta), self.t + self.delta
        cur.softmax(do_sort=True)
        nz = cur.p[cur.p > 0]
        entropy = float(-(nz * np.log(nz)).sum())
        normalized = entropy / math.log(cur.size)
        dyn_t = min_t + (max_t - min_t) * normalized**self.exponent
        apply_temperature(cur, dyn_t)
        e = np.exp(cur.logits - cur.logits[0])
        cur.p = e / e.sum()


def temp(t: float) -> Sampler:
    check_finite("temp", t=t)
    return Empty("temp") if float(t) == 1.0 else Temp(t)


def temp_ext(t: float, delta: float, exponent: float) -> Sampler:
    check_finite("temp_ext", t=t, delta=delta, exponent=exponent)
    if float(t) == 1.0 and float(delta) <= 0:
        return Empty("temp-ext")
    return TempExt(t, delta, exponent)
