"""Metal ops at the documented worst of the functions they call (Metal Shading Language
specification 4.1, §8.4): softmax and log-softmax with ``fast::exp`` and ``fast::log`` and
x·(1.0 / s) (1 ulp), ggml-metal's norms (sum / n at 2.5 ulp, 1.0f / sqrt with sqrt = x·rsqrt(x),
rsqrt 2 ulp), a 32-lane SIMD dot for matmul; MLX's
prefill attention (``fast::exp2`` of scores prescaled by log2 e, 32-key tiles, 1.0 / s at the end,
softcap by ``precise::tanh``); MLX's RoPE frequencies (``precise::exp2`` of -(2i / n_dims)·log2
base, 4 ulp) with ``precise::sin`` / ``cos`` (4 ulp: fast math's are documented only within 2^-13
on [-π, π], outside the default contract); ggml-metal's activations: GELU and softcap with
``precise::tanh`` (5 ulp), SiLU as x / (1 + fast::exp(-x)) under fast division."""
from __future__ import annotations

import math
from typing import Any

import numpy as np

import gpu_impl.ops as base
from properties.zoo.conforming._arith import F32
from properties.zoo.conforming._attention import attention_functions, make_attention
from properties.zoo.conforming._build import install
from properties.zoo.conforming._metal import (METAL, fast_divide, fast_exp, fast_exp2, fast_inv_sqrt, fast_reciprocal,
                                              precise_exp2, precise_sincos, precise_tanh)
from properties.zoo.conforming._ops import dot_simd, op_functions
from properties.zoo.conforming._rope import make_rope

LOG2E_F32 = F32(math.log2(math.e))
SQRT_2_OVER_PI = F32(math.sqrt(2 / math.pi))


def mlx_table(freq_base: float, nd: int) -> np.ndarray:
    """inv_freq_i = exp2(-d·log2 base), d = i / (n_dims / 2) in float32, log2 base from the host."""
    d = (np.arange(nd // 2, dtype=F32) / F32(nd // 2)).astype(F32)
    return precise_exp2((-d * F32(math.log2(freq_base))).astype(F32))


def _prescaled_exp(d: np.ndarray) -> np.ndarray:
    """e^d as MLX's attention computes it: fast::exp2 of the score prescaled by log2 e."""
    return fast_exp2((np.asarray(d, F32) * LOG2E_F32).astype(F32))


def _limits(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """An activation's values at ±inf (x·0 would be NaN)."""
    return np.where(x == -np.inf, F32(0), np.where(x == np.inf, x, y)).astype(F32)


def _gelu(x: np.ndarray) -> np.ndarray:
    inner = (SQRT_2_OVER_PI * (x + F32(0.044715) * x * x * x)).astype(F32)
    return _limits(x, F32(0.5) * x * (F32(1) + precise_tanh(inner)))


def _silu(x: np.ndarray) -> np.ndarray:
    return _limits(x, fast_divide(x, (F32(1) + fast_exp(-x)).astype(F32)))


def gelu(x: Any, approximate: str = "tanh") -> np.ndarray:
    checked = base.gelu(x, approximate)  # gpu_impl's refusals; exact GELU (erf) is its own
    if approximate != "tanh":
        return checked
    with np.errstate(all="ignore"):
        return _gelu(np.asarray(x, F32))


def silu(x: Any) -> np.ndarray:
    base.silu(x)
    with np.errstate(all="ignore"):
        return _silu(np.asarray(x, F32))


def swiglu(gate: Any, up: Any) -> np.ndarray:
    base.swiglu(gate, up)
    with np.errstate(all="ignore"):
        return (_silu(np.asarray(gate, F32)) * np.asarray(up, F32)).astype(F32)


def geglu(gate: Any, up: Any, approximate: str = "tanh") -> np.ndarray:
    checked = base.geglu(gate, up, approximate)
    if approximate != "tanh":
        return checked
    with np.errstate(all="ignore"):
        return (_gelu(np.asarray(gate, F32)) * np.asarray(up, F32)).astype(F32)


def softcap(x: Any, cap: float) -> np.ndarray:
    base.softcap(x, cap)
    c = F32(cap)
    with np.errstate(all="ignore"):
        return (c * precise_tanh((np.asarray(x, F32) / c).astype(F32))).astype(F32)


install(globals(), "gpu_impl.ops", {
    **op_functions(METAL, dot_simd, fast_inv_sqrt),
    "rope": make_rope(mlx_table, precise_sincos),
    "gelu": gelu, "silu": silu, "swiglu": swiglu, "geglu": geglu, "softcap": softcap,
    **attention_functions(make_attention(tile=32, reciprocal=fast_reciprocal, exp=_prescaled_exp,
                                         tanh=precise_tanh))})
