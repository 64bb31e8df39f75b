"""RMS norm and layer norm over the last axis, float32 compute.

Squares are taken of ``x / max|x|`` (a row's own scale), and the denominator is assembled as
``hypot(rms, sqrt(eps))``: bf16 rows reach 3e38, whose squares overflow fp32, and tiny rows
would otherwise lose eps. Decisions as in the oracle: a row with NaN/inf is NaN in full; a zero
(rms_norm) or constant (layer_norm) row gives 0 / bias when eps > 0 and NaN when eps == 0.
"""
from __future__ import annotations

from typing import Any

from gpu_impl.ops._tree import tree_mean
from gpu_impl.ops._xp import array_module, f32, quiet, scalar


def _setup(x: Any, eps: float, affine: dict[str, Any]):
    xp = array_module(x)
    a = f32(xp, x, "x")
    if a.ndim == 0 or a.shape[-1] == 0:
        raise ValueError(f"x must have a non-empty last axis, got shape {tuple(a.shape)}")
    e = scalar(eps, "eps", at_least=0.0)
    n = a.shape[-1]
    out = {}
    for name, v in affine.items():
        if v is None:
            out[name] = None
            continue
        w = f32(xp, xp.asarray(v), name)
        if tuple(w.shape) != (n,):
            raise ValueError(f"{name} must have shape ({n},) to match the last axis of x, got {tuple(w.shape)}")
        out[name] = w
    return xp, a, e, out


def _root_mean_square(xp, c: Any, eps: float) -> tuple[Any, Any]:
    """(hypot(rms(c), sqrt(eps)) per row, rows holding NaN/inf); c is float32 [..., n]."""
    big = xp.abs(c).max(axis=-1, keepdims=True)
    broken = ~xp.isfinite(big)
    s = xp.where(broken | (big == 0), xp.float32(1), big)
    with quiet():
        unit = c / s
        rms = xp.sqrt(tree_mean(xp, unit * unit)) * s  # one tree per row: batch-invariant on CuPy too
    return xp.hypot(rms, xp.float32(eps) ** xp.float32(0.5)), broken


def rms_norm(x: Any, weight: Any = None, eps: float = 1e-6, unit_offset: bool = False) -> Any:
    xp, a, e, aff = _setup(x, eps, {"weight": weight})
    denom, broken = _root_mean_square(xp, a, e)
    with quiet():
        y = a / denom
        if aff["weight"] is not None:
            y = y * (aff["weight"] + xp.float32(1) if unit_offset else aff["weight"])
        elif unit_offset:
            y = y * xp.float32(2)  # (1 + weight) with no weight given means weight = 1
    return xp.where(broken, xp.float32(xp.nan), y)


def layer_norm(x: Any, weight: Any = None, bias: Any = None, eps: float = 1e-5) -> Any:
    xp, a, e, aff = _setup(x, eps, {"weight": weight, "bias": bias})
    big = xp.abs(a).max(axis=-1, keepdims=True)
    s = xp.where(xp.isfinite(big) & (big > 0), big, xp.float32(1))
    with quiet():
        mean = tree_mean(xp, a / s) * s
        # a constant row is centred to exact zeros: its rounded mean must not invent a spread
        flat = a.max(axis=-1, keepdims=True) == a.min(axis=-1, keepdims=True)
        c = xp.where(flat, xp.float32(0), a - mean)
    denom, broken = _root_mean_square(xp, c, e)
    with quiet():
        y = c / denom
        if aff["weight"] is not None:
            y = y * aff["weight"]
        if aff["bias"] is not None:
            y = y + aff["bias"]
    return xp.where(broken | ~xp.isfinite(big), xp.float32(xp.nan), y)
