"""Softmax and log-softmax along an axis, ``z = scale·x + mask``, in float64.

Decisions (the same in gpu_impl):
- ``mask`` is additive and must broadcast to ``x``'s shape without changing it; its entries are
  finite or -inf (a +inf or NaN mask entry is a ValueError: it is never a legitimate mask).
- -inf in ``z`` means "excluded": probability exactly 0, log-probability -inf.
- A row (along ``axis``) holding NaN or +inf, or with no finite entry, has no distribution:
  every entry of that row is NaN (as ``exp(z - max)`` gives there); other rows are unaffected.
- ``scale`` must be finite and > 0 (a zero or negative scale would flatten or reverse the
  distribution and turn -inf into NaN); an empty axis is a ValueError.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from oracle.ops._checks import as64, finite_scalar


def _shifted(x: Any, axis: int, scale: float, mask: Any) -> tuple[np.ndarray, np.ndarray]:
    """(z moved to the last axis, rows without a distribution)."""
    z = as64(x, "x")
    if z.ndim == 0:
        raise ValueError("x must have at least one axis")
    if not -z.ndim <= axis < z.ndim:
        raise ValueError(f"axis {axis} is out of range for x of shape {z.shape}")
    if z.shape[axis] == 0:
        raise ValueError(f"softmax over an empty axis (x has shape {z.shape})")
    z = finite_scalar(scale, "scale", lo=0.0, lo_open=True) * z
    if mask is not None:
        m = as64(mask, "mask")
        if np.isnan(m).any() or (m == np.inf).any():
            raise ValueError("mask entries must be finite or -inf (found NaN or +inf)")
        try:
            shape = np.broadcast_shapes(m.shape, z.shape)
        except ValueError:
            shape = None
        if shape != z.shape:
            raise ValueError(f"mask of shape {m.shape} does not broadcast to x's shape {z.shape}")
        with np.errstate(invalid="ignore"):
            z = z + m
    z = np.moveaxis(z, axis, -1)
    bad = np.isnan(z).any(axis=-1) | (z == np.inf).any(axis=-1) | ~np.isfinite(z).any(axis=-1)
    return z, bad


def _normalise(z: np.ndarray, bad: np.ndarray, log: bool) -> np.ndarray:
    safe = np.where(bad[..., None], 0.0, z)
    top = safe.max(axis=-1, keepdims=True)
    with np.errstate(invalid="ignore"):
        d = safe - top  # -inf stays -inf: exp gives the exact 0
    e = np.exp(d)
    total = e.sum(axis=-1, keepdims=True)
    out = d - np.log(total) if log else e / total
    return np.where(bad[..., None], np.nan, out)


def softmax(x: Any, axis: int = -1, scale: float = 1.0, mask: Any = None) -> np.ndarray:
    """``exp(z_i - max z) / sum_j exp(z_j - max z)`` along ``axis``."""
    z, bad = _shifted(x, axis, scale, mask)
    return np.moveaxis(_normalise(z, bad, log=False), -1, axis)


def log_softmax(x: Any, axis: int = -1, scale: float = 1.0, mask: Any = None) -> np.ndarray:
    """``z_i - max z - log sum_j exp(z_j - max z)`` along ``axis`` (-inf where z is -inf)."""
    z, bad = _shifted(x, axis, scale, mask)
    return np.moveaxis(_normalise(z, bad, log=True), -1, axis)
