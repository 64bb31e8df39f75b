"""Argument checks shared by the oracle ops: every refusal is a ValueError naming the problem."""
from __future__ import annotations

import math
from typing import Any

import numpy as np


def as64(x: Any, name: str, ndim: int | None = None) -> np.ndarray:
    """``x`` widened to float64 (exact for float16, bfloat16 and float32 inputs); a float64 input
    is returned as it is, not copied (no op writes into its inputs, and a model's decoded
    weights, read-only, are large: a copy per use doubled the forward pass's peak memory)."""
    a = np.asarray(x)
    if a.dtype.kind != "f" and a.dtype.name != "bfloat16":
        raise ValueError(f"{name} must be a floating-point array, got dtype {a.dtype}")
    if ndim is not None and a.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {a.shape}")
    return a.astype(np.float64, copy=False)


def as_int(x: Any, name: str, ndim: int | None = None) -> np.ndarray:
    a = np.asarray(x)
    if a.dtype.kind not in "iu":
        raise ValueError(f"{name} must be an integer array, got dtype {a.dtype}")
    if ndim is not None and a.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {a.shape}")
    return a.astype(np.int64)


def finite_scalar(v: Any, name: str, *, lo: float | None = None, lo_open: bool = False) -> float:
    f = float(v)
    if not math.isfinite(f):
        raise ValueError(f"{name} must be finite, got {v!r}")
    if lo is not None and (f < lo or (lo_open and f == lo)):
        raise ValueError(f"{name} must be {'>' if lo_open else '>='} {lo}, got {v!r}")
    return f


def positive_int(v: Any, name: str) -> int:
    if int(v) != v or int(v) < 1:
        raise ValueError(f"{name} must be a positive integer, got {v!r}")
    return int(v)


def nonfinite_rows(x: np.ndarray) -> np.ndarray:
    """Rows (over the last axis) holding a NaN or an infinity."""
    return ~np.isfinite(x).all(axis=-1)
