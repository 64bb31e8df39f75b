"""The peers' coarse allowances: one llama.cpp-style decision on a float32 mass, and a
half-precision engine's log-probabilities as a shift of a cut's threshold."""
from __future__ import annotations

from typing import Any

import numpy as np

from .units import U32, log2n, unit_roundoff


def mass_allowance(k: int, n: int, u: float = U32) -> float:
    """The peers' model of one llama.cpp-style decision on a float32 mass: a sequential sum of k
    terms (2k: the k additions and the terms' own roundings) and a tree normaliser over n
    (log2 n + 8). The suite's own brackets use ``mass_bound`` (order and row aware)."""
    return (2 * k + log2n(n) + 8) * u


def half_logprob_allowance(row64: np.ndarray, dtype: Any) -> float:
    """A half-precision engine's log-probabilities (MLX: ``logits - logsumexp(logits)`` in the
    logits' dtype), as a shift of a cut's threshold: each logprob carries the dtype's rounding of
    the penalised logit (|l|), of the logsumexp (|max| + log2 n, and 2 for its exp / log), and of the
    subtraction (|lp| <= |l| + |lse|): u·(3·max|l| + 2·log2 n + 4) in nats. A probability ratio
    (min_p: lp_i against lp_max + ln m) moves by twice that; a mass (top_p, whose exp and cumulative
    sum MLX runs in float32) by that, relative, plus the float32 sum's ``mass_allowance``. The
    larger of the two is returned: one δ for both thresholds."""
    x = np.asarray(row64, dtype=np.float64)
    fin = np.isfinite(x)
    n = int(fin.sum())
    if not n:
        return 0.0
    lp_err = unit_roundoff(dtype) * (3 * float(np.abs(x[fin]).max()) + 2 * log2n(n) + 4)
    return max(2 * lp_err, lp_err + mass_allowance(n, n))
