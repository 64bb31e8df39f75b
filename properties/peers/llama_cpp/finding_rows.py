"""Which judged calls witness a ledger finding: the rows on which a llama.cpp defect shows.

A ledger entry (``findings.Finding``) names one of these in its ``shows_on`` field. When llama.cpp
itself is judged through the protocol (``examples/llama_cpp/harness.py``), a failing case whose
call satisfies a finding's ``shows_on`` is filed as that finding, by id, not as a judge failure
(``filed_as_findings``): the decision reads the case's arrays and parameters, never a message.

Each predicate replays the part of llama.cpp's arithmetic that goes wrong (float32 where it
computes in float32), on the row exactly as the engine received it, so it is true only where the
defect can act; a failure it does not cover stays a failure.
"""
from __future__ import annotations

from typing import Any

import numpy as np

F32_MAX = float(np.finfo(np.float32).max)
BUCKETS_ABOVE = 128
"""llama.cpp bucket-sorts arrays of more than 128 candidates (fewer: a partial std::sort)."""
SORTING = frozenset({"top_k", "top_p", "typical", "xtc", "mirostat_v2", "temp_ext", "min_p",
                     "llama_cpp_chain", "llama_cpp_chain_dist"})
"""Judged functions whose llama.cpp samplers sort the candidates (min_p only in its fallback)."""


def finite(row: np.ndarray) -> np.ndarray:
    r = np.asarray(row, dtype=np.float32)
    return r[np.isfinite(r)]


def bucket_overflow(function: str, row: np.ndarray, params: dict[str, Any]) -> bool:
    """A sort of more than 128 candidates with a logit whose bucket index 6.4·l + 64 (float32)
    leaves int32: the float -> int conversion overflows and the token lands in the lowest bucket."""
    f = finite(row)
    if function not in SORTING or f.size <= BUCKETS_ABOVE:
        return False
    if function == "top_k" and not int(params.get("k", 0)) > BUCKETS_ABOVE:
        return False  # top_k(k <= 128) partially sorts with std::partial_sort
    index = np.float32(6.4) * f + np.float32(64)
    return bool((index >= np.float32(2.0 ** 31)).any())


def variance_overflow(function: str, row: np.ndarray, params: dict[str, Any]) -> bool:
    """top_n_sigma's float32 mean or running sum of squared deviations is not finite."""
    f = finite(row)
    if function != "top_n_sigma" or f.size <= 1 or float(params.get("n", 0)) <= 0:
        return False
    with np.errstate(over="ignore", invalid="ignore"):
        mean = np.cumsum(f, dtype=np.float32)[-1] / np.float32(f.size)
        squares = ((f - mean).astype(np.float64) ** 2).astype(np.float32)
        acc = np.cumsum(squares, dtype=np.float32)[-1]
    return not (np.isfinite(mean) and np.isfinite(acc))


def _zero_probability(f: np.ndarray) -> bool:
    with np.errstate(under="ignore"):
        return bool((np.exp(f - f.max()) == 0).any())


def typical_nan_entropy(function: str, row: np.ndarray, params: dict[str, Any]) -> bool:
    """typical on at most 16 candidates, one of whose float32 probabilities is 0 (entropy NaN)."""
    f = finite(row)
    return function == "typical" and 1 < f.size <= 16 and _zero_probability(f)


def typical_nan_entropy_scrambled(function: str, row: np.ndarray, params: dict[str, Any]) -> bool:
    """The same on more than 16 candidates, where std::sort scrambles the NaN keys."""
    f = finite(row)
    return function == "typical" and f.size > 16 and _zero_probability(f)


def zero_uniform_zero_weight(function: str, row: np.ndarray, params: dict[str, Any]) -> bool:
    """dist at u = 0 on a row whose first candidate (vocabulary order) weighs exactly 0."""
    f = finite(row)
    if function != "dist" or f.size < 2 or float(params.get("u", 1.0)) != 0.0:
        return False
    with np.errstate(under="ignore"):
        return bool(np.exp(np.float32(f[0] - f.max())) == 0)
