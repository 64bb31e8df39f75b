"""Activations in the formulas engines use (float32): GELU ``0.5·x·(1 + tanh(…))`` or
``0.5·x·(1 + erf(x/√2))``, SiLU ``x / (1 + exp(-x))``, the gated products, and softcap
``c·tanh(x/c)``. Their limits at ±inf are set explicitly (``-inf·0`` would be NaN)."""
from __future__ import annotations

import math
from typing import Any

from gpu_impl.ops._xp import array_module, f32, quiet, scalar, special

_K = math.sqrt(2.0 / math.pi)


def _at_infinity(xp, x: Any, y: Any) -> Any:
    return xp.where(x == -xp.inf, xp.float32(0), xp.where(x == xp.inf, x, y))


def _gelu32(xp, a: Any, approximate: str) -> Any:
    half, one = xp.float32(0.5), xp.float32(1)
    with quiet():
        if approximate == "tanh":
            inner = xp.float32(_K) * (a + xp.float32(0.044715) * a * a * a)
            y = half * a * (one + xp.tanh(inner))
        elif approximate == "none":
            y = half * a * (one + special(xp).erf(a * xp.float32(1 / math.sqrt(2.0))))
        else:
            raise ValueError(f"approximate must be 'tanh' or 'none', got {approximate!r}")
    return _at_infinity(xp, a, y)


def _silu32(xp, a: Any) -> Any:
    with quiet():
        return _at_infinity(xp, a, a / (xp.float32(1) + xp.exp(-a)))


def gelu(x: Any, approximate: str = "tanh") -> Any:
    xp = array_module(x)
    return _gelu32(xp, f32(xp, x, "x"), approximate)


def silu(x: Any) -> Any:
    xp = array_module(x)
    return _silu32(xp, f32(xp, x, "x"))


def _pair(gate: Any, up: Any):
    xp = array_module(gate, up)
    g, u = f32(xp, gate, "gate"), f32(xp, up, "up")
    if g.shape != u.shape:
        raise ValueError(f"gate {tuple(g.shape)} and up {tuple(u.shape)} must have the same shape")
    return xp, g, u


def swiglu(gate: Any, up: Any) -> Any:
    xp, g, u = _pair(gate, up)
    with quiet():
        return _silu32(xp, g) * u


def geglu(gate: Any, up: Any, approximate: str = "tanh") -> Any:
    xp, g, u = _pair(gate, up)
    with quiet():
        return _gelu32(xp, g, approximate) * u


def softcap(x: Any, cap: float) -> Any:
    c = scalar(cap, "cap", above=0.0)
    xp = array_module(x)
    c32 = xp.float32(c)
    return c32 * xp.tanh(f32(xp, x, "x") / c32)
