"""Activations and softcap, in float64, written in cancellation-free forms.

- gelu, approximate="tanh": ``0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))``, evaluated as the
  identical ``x / (1 + exp(-2z))`` so that x ≪ 0 keeps full relative accuracy.
- gelu, approximate="none": ``x·Φ(x) = 0.5·x·erfc(-x/√2)``.
- silu(x) = x·σ(x); swiglu(g, u) = silu(g)·u; geglu(g, u) = gelu(g)·u.
- softcap(x, c) = c·tanh(x/c) (Gemma 2's final logit softcap uses c = 30, attention c = 50).

Decisions (the same in gpu_impl): NaN stays NaN; ±inf map to the limits (gelu and silu:
+inf → +inf, -inf → 0; softcap: ±inf → ±c); gate and up must have the same shape; the
approximation is "tanh" or "none"; c must be finite and > 0.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
from scipy import special

from oracle.ops._checks import as64, finite_scalar

GELU_TANH_C = math.sqrt(2.0 / math.pi)
GELU_TANH_A = 0.044715


def _limits(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """+inf → +inf and -inf → 0 for the x·gate(x) activations."""
    return np.where(x == np.inf, np.inf, np.where(x == -np.inf, 0.0, y))


def gelu(x: Any, approximate: str = "tanh") -> np.ndarray:
    a = as64(x, "x")
    with np.errstate(all="ignore"):
        if approximate == "tanh":
            z = GELU_TANH_C * (a + GELU_TANH_A * a**3)
            y = a / (1.0 + np.exp(-2.0 * z))
        elif approximate == "none":
            y = 0.5 * a * special.erfc(-a / math.sqrt(2.0))
        else:
            raise ValueError(f"approximate must be 'tanh' or 'none', got {approximate!r}")
    return _limits(a, y)


def silu(x: Any) -> np.ndarray:
    a = as64(x, "x")
    with np.errstate(all="ignore"):
        return _limits(a, a * special.expit(a))


def _gated(gate: Any, up: Any, act) -> np.ndarray:
    g, u = as64(gate, "gate"), as64(up, "up")
    if g.shape != u.shape:
        raise ValueError(f"gate {g.shape} and up {u.shape} must have the same shape")
    with np.errstate(invalid="ignore"):
        return act(g) * u


def swiglu(gate: Any, up: Any) -> np.ndarray:
    return _gated(gate, up, silu)


def geglu(gate: Any, up: Any, approximate: str = "tanh") -> np.ndarray:
    return _gated(gate, up, lambda g: gelu(g, approximate))


def softcap(x: Any, cap: float) -> np.ndarray:
    c = finite_scalar(cap, "cap", lo=0.0, lo_open=True)
    return c * np.tanh(as64(x, "x") / c)


def gelu_tanh_erf_gap() -> float:
    """max over x of |gelu_tanh(x) - gelu_erf(x)|: a dense float64 scan of [-10, 10] (outside,
    both are within 1e-20 of x or of 0). The GELU-approximation property uses this bound."""
    x = np.linspace(-10.0, 10.0, 2_000_001)
    return float(np.max(np.abs(gelu(x, "tanh") - gelu(x, "none"))))
