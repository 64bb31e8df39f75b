"""Near-threshold op bugs: reduced-precision inputs or accumulators, a dropped max, an eps in
the wrong place, a rounded scale. Factories take the base ops module (gpu_impl.ops) and return
the replacement; ``# the bug`` marks the slip."""
from __future__ import annotations

from types import ModuleType
from typing import Any, Callable

import ml_dtypes
import numpy as np

from gpu_impl.ops._xp import f32, quiet
from gpu_impl.ops.norms import _setup
from properties.zoo.conforming._arith import F32, sequential_scan
from properties.zoo.conforming._attention import make_attention
from properties.zoo.conforming._ops import _affine, make_softmax
from properties.zoo.near_threshold.sampler_bugs import _Fp16Exp, _pairwise_sum

BF16 = ml_dtypes.bfloat16


def to_tf32(a: np.ndarray) -> np.ndarray:
    """Round float32 to TF32 (10 explicit mantissa bits), to nearest, ties to even, as tensor
    cores read float32 operands when TF32 math is enabled."""
    bits = np.ascontiguousarray(a, dtype=F32).view(np.uint32)
    keep = (bits >> np.uint32(13)) & np.uint32(1)
    rounded = (bits + np.uint32(0xFFF) + keep) & np.uint32(0xFFFFE000)
    return np.where(np.isfinite(a), rounded.view(F32), a)


def _rounded_matmul(rounding: Callable[[np.ndarray], np.ndarray]) -> Callable[[ModuleType], Callable]:
    def factory(base: ModuleType) -> Callable[..., Any]:
        def matmul(a: Any, b: Any) -> Any:
            # the bug: operands rounded on the way into the GEMM (accumulation stays float32)
            return base.matmul(rounding(f32(np, a, "a")), rounding(f32(np, b, "b")))
        return matmul
    return factory


matmul_tf32_inputs = _rounded_matmul(to_tf32)
matmul_bf16_inputs = _rounded_matmul(lambda a: a.astype(BF16).astype(F32))


def rms_norm_fp16_accum(base: ModuleType) -> Callable[..., Any]:
    def rms_norm(x: Any, weight: Any = None, eps: float = 1e-6, unit_offset: bool = False) -> np.ndarray:
        _, a, e, aff = _setup(x, eps, {"weight": weight})
        with quiet():
            sq = (a * a).astype(np.float16)
            ss = np.cumsum(sq, axis=-1, dtype=np.float16)[..., -1:]  # the bug: a half accumulator
            y = a / np.sqrt(ss.astype(F32) / F32(a.shape[-1]) + F32(e))
        return _affine(y, aff, unit_offset)
    return rms_norm


def rms_norm_eps_outside_sqrt(base: ModuleType) -> Callable[..., Any]:
    def rms_norm(x: Any, weight: Any = None, eps: float = 1e-6, unit_offset: bool = False) -> np.ndarray:
        _, a, e, aff = _setup(x, eps, {"weight": weight})
        with quiet():
            y = a / (np.sqrt(np.mean(a * a, axis=-1, keepdims=True)) + F32(e))  # the bug: sqrt(ms) + eps
        return _affine(y, aff, unit_offset)
    return rms_norm


def softmax_no_max(base: ModuleType) -> Callable[..., Any]:
    def softmax(x: Any, axis: int = -1, scale: float = 1.0, mask: Any = None) -> np.ndarray:
        ref = base.softmax(x, axis, scale, mask)  # refusals, and NaN for rows with no distribution
        z = f32(np, x, "x") * F32(scale)
        if mask is not None:
            z = z + f32(np, mask, "mask")
        with quiet():
            e = np.exp(z)  # the bug: no max subtraction
            p = e / e.sum(axis=axis, keepdims=True)
        return np.where(np.isnan(ref), ref, p)
    return softmax


def softmax_fp16_exp(base: ModuleType) -> Callable[..., Any]:
    return make_softmax(_Fp16Exp("fp16_exp", _pairwise_sum, sequential_scan))


def attention_scale_bf16(base: ModuleType) -> Callable[..., Any]:
    def attention(q: Any, k: Any, v: Any, q_pos: Any, k_pos: Any, *, scale: float | None = None, **kw: Any):
        s = 1.0 / np.sqrt(np.asarray(q).shape[2]) if scale is None else scale
        # the bug: the softmax scale stored as a bf16 kernel parameter (1/sqrt(128) -> 0.08837890625)
        return base.attention(q, k, v, q_pos, k_pos, scale=float(np.float32(s).astype(BF16)), **kw)
    return attention


def attention_tile_no_rescale(base: ModuleType) -> Callable[..., Any]:
    # the bug: a 64-key flash-attention tile loop that does not rescale the value accumulator
    # when a later tile raises the running max (invisible unless a query sees > 64 keys)
    return make_attention(tile=64, reciprocal=True, rescale=False)


__all__ = ["to_tf32", "matmul_tf32_inputs", "matmul_bf16_inputs", "rms_norm_fp16_accum",
           "rms_norm_eps_outside_sqrt", "softmax_no_max", "softmax_fp16_exp", "attention_scale_bf16",
           "attention_tile_no_rescale"]
