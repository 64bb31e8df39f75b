"""Comparison metrics for logit and activation vectors (float64), used by the report, the
parity tool and the "cosine lies" property.

A high cosine does not mean the same tokens win: two logit vectors sharing a large common
component have cosine ≈ 1 whatever their top-k are. Compare with top-k overlap and KL too.
"""
from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np

_BITS = {"float64": np.int64, "float32": np.uint32, "float16": np.uint16, "bfloat16": np.uint16}


def _vec(x: Any, name: str) -> np.ndarray:
    a = np.asarray(x).astype(np.float64).ravel()
    if a.size == 0:
        raise ValueError(f"{name} is empty")
    return a


def _pair(a: Any, b: Any) -> tuple[np.ndarray, np.ndarray]:
    x, y = _vec(a, "a"), _vec(b, "b")
    if x.shape != y.shape:
        raise ValueError(f"a and b differ in size: {x.size} vs {y.size}")
    return x, y


def cosine(a: Any, b: Any) -> float:
    """a·b / (|a| |b|); undefined (ValueError) for a zero or non-finite vector."""
    x, y = _pair(a, b)
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise ValueError("cosine of a vector with NaN or inf is undefined")
    # scale first so that |x|² cannot overflow
    x, y = x / max(np.abs(x).max(), 1e-300), y / max(np.abs(y).max(), 1e-300)
    nx, ny = np.linalg.norm(x), np.linalg.norm(y)
    if nx == 0 or ny == 0:
        raise ValueError("cosine with a zero vector is undefined")
    return float(np.clip(x @ y / (nx * ny), -1.0, 1.0))


def top_k_ids(a: Any, k: int) -> np.ndarray:
    """The k largest entries, ties broken by the lower index (llama.cpp's order); NaN refused."""
    x = _vec(a, "a")
    if np.isnan(x).any():
        raise ValueError("top-k of a vector with NaN is undefined")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    return np.lexsort((np.arange(x.size), -x))[:k]


def top_k_overlap(a: Any, b: Any, k: int) -> int:
    """How many of a's top-k ids are also among b's top-k (0 … min(k, n))."""
    x, y = _pair(a, b)
    return len(set(top_k_ids(x, k).tolist()) & set(top_k_ids(y, k).tolist()))


def _log_softmax(x: np.ndarray) -> np.ndarray:
    if np.isnan(x).any() or (x == np.inf).any() or not np.isfinite(x).any():
        raise ValueError("logits must have no NaN/+inf and at least one finite entry")
    m = x[np.isfinite(x)].max()
    return x - m - np.log(np.exp(x - m).sum())


def kl_divergence(logits_p: Any, logits_q: Any) -> float:
    """KL(softmax(p) ‖ softmax(q)) in nats; inf when p puts mass where q has -inf."""
    x, y = _pair(logits_p, logits_q)
    lp, lq = _log_softmax(x), _log_softmax(y)
    p = np.exp(lp)
    live = p > 0
    if (live & ~np.isfinite(lq)).any():
        return float("inf")
    return float(max(0.0, np.sum(p[live] * (lp[live] - lq[live]))))


def max_abs_error(x: Any, ref: Any) -> float:
    a, r = _pair(x, ref)
    return float(np.max(np.abs(a - r)))


def max_rel_error(x: Any, ref: Any, floor: float = float(np.finfo(np.float32).tiny)) -> float:
    """max |x - ref| / max(|ref|, floor): the floor keeps zeros and subnormals meaningful."""
    a, r = _pair(x, ref)
    return float(np.max(np.abs(a - r) / np.maximum(np.abs(r), floor)))


def ulp_distance(x: Any, y: Any, dtype: str = "float32") -> np.ndarray:
    """Number of representable ``dtype`` values between x and y (both rounded to dtype first).

    Floats are mapped to integers that count representable values in order (-0 and +0 both map
    to 0), so the distance is a plain difference. NaN is refused; ±inf are the ends of the line.
    """
    if dtype not in _BITS:
        raise ValueError(f"dtype must be one of {sorted(_BITS)}, got {dtype!r}")
    dt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(dtype)
    a, b = np.asarray(x, dtype=np.float64).astype(dt), np.asarray(y, dtype=np.float64).astype(dt)
    if a.shape != b.shape:
        raise ValueError(f"shapes differ: {a.shape} vs {b.shape}")
    if np.isnan(a.astype(np.float64)).any() or np.isnan(b.astype(np.float64)).any():
        raise ValueError("ULP distance to NaN is undefined")
    d = np.abs(_ordered(a, _BITS[dtype]) - _ordered(b, _BITS[dtype]))
    return np.asarray(d)  # object dtype for float64: distances there can pass 2^63


def _ordered(a: np.ndarray, bits_type: type) -> np.ndarray:
    """Sign-magnitude bits → a signed count of representable values from zero."""
    width = np.dtype(bits_type).itemsize * 8
    bits = np.asarray(a).view(bits_type).astype(object if width == 64 else np.int64)
    sign = 1 << (width - 1)
    if width == 64:  # int64 view: the sign bit reads as a negative number
        return np.where(bits < 0, -(bits + sign), bits)
    return np.where(bits >= sign, -(bits - sign), bits)
