"""Biased distributions at an exact total-variation distance from a given one.

Each shape is a bug class a sampler can have; each returns q with TVD(p, q) = delta (to ~1e-12)
or raises ValueError when p cannot be moved that far in that shape.

- ``sharper`` / ``flatter``: q ∝ p^γ (a wrong temperature, or a wrong renormalisation);
- ``shift``: delta taken from the heaviest tokens in proportion, all given to the lightest token
  of the support (an off-by-one or boundary bug feeding one token);
- ``id_tail``: the last tokens in id order lose delta, every other token gains in proportion
  (an inverse-CDF prefix sum that stalls or is cut short near the end of the row);
- ``random_sign``: every token moves by the same relative amount, up or down at random (seeded),
  the two groups rescaled so that each moves by delta (probabilities rounded to a short format,
  or a per-token weight error): coherent in neither the probability nor the id order, so
  merged bins average it away and only a per-token statistic sees it.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
from scipy.optimize import brentq


def tvd(p: np.ndarray, q: np.ndarray) -> float:
    return 0.5 * float(np.abs(np.asarray(p) - np.asarray(q)).sum())


def _power(p: np.ndarray, gamma: float) -> np.ndarray:
    nz = p > 0
    logq = np.full(p.size, -np.inf)
    logq[nz] = gamma * np.log(p[nz])
    q = np.exp(logq - logq[nz].max())
    return q / q.sum()


def _tempered(p: np.ndarray, delta: float, far: float) -> np.ndarray:
    """q = p^γ normalised, γ between 1 and ``far`` (TVD grows monotonically away from γ = 1)."""
    f = lambda g: tvd(p, _power(p, g)) - delta  # noqa: E731
    if f(far) <= 0:
        raise ValueError(f"no power of p reaches TVD {delta} with γ between 1 and {far}")
    return _power(p, brentq(f, min(1.0, far), max(1.0, far), xtol=1e-15, rtol=1e-15))


def sharper(p: np.ndarray, delta: float) -> np.ndarray:
    return _tempered(p, delta, 64.0)


def flatter(p: np.ndarray, delta: float) -> np.ndarray:
    return _tempered(p, delta, 0.0)


def shift(p: np.ndarray, delta: float) -> np.ndarray:
    order = np.argsort(-p, kind="stable")
    order = order[p[order] > 0]
    if order.size < 2:
        raise ValueError("shift needs at least two tokens with probability > 0")
    n_heavy = int(np.searchsorted(np.cumsum(p[order]), 2 * delta)) + 1  # heavy set holds >= 2·delta
    heavy = order[:min(n_heavy, order.size - 1)]
    if p[heavy].sum() <= delta:
        raise ValueError(f"the heavy tokens hold less than {delta}")
    q = p.copy()
    q[heavy] *= 1 - delta / p[heavy].sum()
    q[order[-1]] += delta
    return q


def id_tail(p: np.ndarray, delta: float) -> np.ndarray:
    q = p.copy()
    left = delta
    for i in np.flatnonzero(p > 0)[::-1]:
        take = min(q[i], left)
        q[i] -= take
        left -= take
        if left <= 0:
            break
    untouched = q == p
    if left > 0 or not (untouched & (p > 0)).any():
        raise ValueError(f"id_tail: cannot move {delta} of mass from the end of the row")
    q[untouched] *= 1 + delta / p[untouched].sum()
    return q


RANDOM_SIGN_SEED = 20261


def random_sign(p: np.ndarray, delta: float) -> np.ndarray:
    """q = p + delta·(p·[up]/P_up - p·[down]/P_down), the signs drawn with a fixed seed."""
    live = np.flatnonzero(p > 0)
    up = np.random.default_rng([RANDOM_SIGN_SEED, p.size]).random(live.size) < 0.5
    p_up, p_down = p[live[up]].sum(), p[live[~up]].sum()
    if p_down <= delta or p_up == 0:
        raise ValueError(f"random_sign: the tokens drawn down hold {p_down:.3g}, not more than {delta}")
    q = p.copy()
    q[live[up]] *= 1 + delta / p_up
    q[live[~up]] *= 1 - delta / p_down
    return q


SHAPES: dict[str, Callable[[np.ndarray, float], np.ndarray]] = {
    "sharper": sharper, "flatter": flatter, "shift": shift, "id_tail": id_tail, "random_sign": random_sign,
}
