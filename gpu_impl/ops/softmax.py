"""Softmax / log-softmax along an axis in float32: z = scale·x + mask, max-subtracted.

Same decisions as the oracle (see gpu_impl.ops): rows with NaN, +inf or no finite entry come
out NaN; -inf entries give p = 0 / log p = -inf; a +inf or NaN mask entry, a mask that does
not broadcast to x's shape, a non-positive scale or an empty axis are ValueErrors.
"""
from __future__ import annotations

from typing import Any

from gpu_impl.ops._tree import tree_sum
from gpu_impl.ops._xp import array_module, f32, quiet, scalar


def _logits(x: Any, axis: int, scale: float, mask: Any) -> tuple[Any, Any, int]:
    xp = array_module(x) if mask is None else array_module(x, mask)
    z = f32(xp, x, "x")
    if z.ndim == 0:
        raise ValueError("x must have at least one axis")
    if not -z.ndim <= axis < z.ndim:
        raise ValueError(f"axis {axis} is out of range for x of shape {tuple(z.shape)}")
    axis %= z.ndim
    if z.shape[axis] == 0:
        raise ValueError(f"softmax over an empty axis (x has shape {tuple(z.shape)})")
    s = scalar(scale, "scale", above=0.0)
    if s != 1.0:
        z = z * xp.float32(s)
    if mask is not None:
        m = f32(xp, mask, "mask")
        if bool(xp.isnan(m).any()) or bool((m == xp.inf).any()):
            raise ValueError("mask entries must be finite or -inf (found NaN or +inf)")
        if m.ndim > z.ndim or any(a not in (1, b) for a, b in zip(m.shape[::-1], z.shape[::-1])):
            raise ValueError(f"mask of shape {tuple(m.shape)} does not broadcast to x's shape {tuple(z.shape)}")
        with quiet():  # x = +inf under a -inf mask: NaN, decided below (row undefined)
            z = z + m
    return xp, z, axis


def _shift(xp, z: Any, axis: int) -> tuple[Any, Any]:
    """(z - row max with -inf kept, rows without a distribution)."""
    top = z.max(axis=axis, keepdims=True)  # NaN propagates through max; +inf and all -inf show up here
    undefined = ~xp.isfinite(top)
    with quiet():
        return z - xp.where(undefined, xp.float32(0), top), undefined


def softmax(x: Any, axis: int = -1, scale: float = 1.0, mask: Any = None) -> Any:
    xp, z, axis = _logits(x, axis, scale, mask)
    d, undefined = _shift(xp, z, axis)
    with quiet():
        e = xp.exp(d)
        p = e / tree_sum(xp, e, axis)  # one tree per row: batch-invariant on CuPy too
    return xp.where(undefined, xp.float32(xp.nan), p)


def log_softmax(x: Any, axis: int = -1, scale: float = 1.0, mask: Any = None) -> Any:
    xp, z, axis = _logits(x, axis, scale, mask)
    d, undefined = _shift(xp, z, axis)
    with quiet():
        out = d - xp.log(tree_sum(xp, xp.exp(d), axis))
    return xp.where(undefined, xp.float32(xp.nan), out)
