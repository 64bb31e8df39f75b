"""RMS norm and layer norm over the last axis, in float64.

Decisions (the same in gpu_impl):
- ``eps`` must be finite and >= 0 (ggml asserts ``eps >= 0``); ``weight``/``bias`` must have
  shape ``(n,)`` where n is the last axis; n >= 1.
- A row holding NaN or ±inf is NaN in full (the statistic of that row is undefined), other rows
  are unaffected.
- ``rms_norm`` of an all-zero row is 0 when eps > 0 and NaN when eps == 0 (0/0, as ggml
  computes it); ``layer_norm`` of a constant row is ``bias`` when eps > 0, NaN when eps == 0.
- ``unit_offset=True`` is the ``(1 + weight)`` scaling (Gemma's RMSNorm).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from oracle.ops._checks import as64, finite_scalar, nonfinite_rows


def _affine(v: Any, name: str, n: int) -> np.ndarray:
    a = as64(v, name)
    if a.shape != (n,):
        raise ValueError(f"{name} must have shape ({n},) to match the last axis of x, got {a.shape}")
    return a


def _rows(x: Any, eps: float) -> tuple[np.ndarray, float]:
    a = as64(x, "x")
    if a.ndim == 0 or a.shape[-1] == 0:
        raise ValueError(f"x must have a non-empty last axis, got shape {a.shape}")
    return a, finite_scalar(eps, "eps", lo=0.0)


def rms_norm(x: Any, weight: Any = None, eps: float = 1e-6, unit_offset: bool = False) -> np.ndarray:
    """``x / sqrt(mean(x²) + eps) · w`` with ``w = weight`` or ``1 + weight``."""
    a, eps = _rows(x, eps)
    n = a.shape[-1]
    w = np.ones(n) if weight is None else _affine(weight, "weight", n)
    if unit_offset:
        w = 1.0 + w
    bad = nonfinite_rows(a)
    a0 = np.where(bad[..., None], 0.0, a)
    denom = np.sqrt(np.mean(a0 * a0, axis=-1, keepdims=True) + eps)
    with np.errstate(invalid="ignore", divide="ignore"):
        y = a0 / denom * w
    return np.where(bad[..., None], np.nan, y)


def layer_norm(x: Any, weight: Any = None, bias: Any = None, eps: float = 1e-5) -> np.ndarray:
    """``(x - mean) / sqrt(var + eps) · weight + bias`` with the biased (1/n) variance."""
    a, eps = _rows(x, eps)
    n = a.shape[-1]
    w = np.ones(n) if weight is None else _affine(weight, "weight", n)
    b = np.zeros(n) if bias is None else _affine(bias, "bias", n)
    bad = nonfinite_rows(a)
    a0 = np.where(bad[..., None], 0.0, a)
    centred = a0 - np.mean(a0, axis=-1, keepdims=True)
    var = np.mean(centred * centred, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        y = centred / np.sqrt(var + eps) * w + b
    return np.where(bad[..., None], np.nan, y)
