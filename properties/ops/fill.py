"""Value families for op inputs: NumPy fills arrays from (family, shape, seed, dtype).

Logit-like rows (softmax, argmax, softcap, output logits) reuse the sampler families of
``properties.strategies.make_logits``; activations, norms, RoPE and attention draw from the
value families below. Every fill is rounded to the storage dtype: the oracle sees exactly what
the implementation sees.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from properties.samplers.strategies import DTYPES, FAMILIES as LOGIT_FAMILIES, FP32_ONLY, make_logits

VALUE_FAMILIES = ("normal", "scaled", "wide", "outlier", "offset", "tiny", "ties", "huge", "near_max")
# 1e30 does not fit in fp16; bf16 and fp32 hold it
FP16_EXCLUDED = {"huge", "past_fp16"}


def dtype_max(dtype: str) -> float:
    return float(ml_dtypes.finfo(DTYPES[dtype]).max)


def families_for(dtype: str, families: tuple[str, ...]) -> tuple[str, ...]:
    if dtype == "float16":
        return tuple(f for f in families if f not in FP16_EXCLUDED)
    if dtype == "bfloat16":  # the sampler families past fp16's range are fp32-only there
        return tuple(f for f in families if f not in FP32_ONLY - {"huge"})
    return families


def _values(rng: np.random.Generator, family: str, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    row_shape = shape[:-1] + (1,) if shape else ()
    if family == "normal":
        return rng.normal(0, 1, shape)
    if family == "scaled":  # each row its own magnitude: eps matters for the small ones
        return rng.normal(0, 1, shape) * 10.0 ** rng.uniform(-4, 4, row_shape)
    if family == "wide":  # magnitudes spread over ten decades within a row
        return rng.choice([-1.0, 1.0], shape) * 10.0 ** rng.uniform(-6, 4, shape)
    if family == "outlier":
        x = rng.normal(0, 1, shape)
        hit = rng.random(shape) < 0.02
        hit.reshape(-1, shape[-1])[:, 0] = True
        return np.where(hit, x * 1e3, x)
    if family == "offset":  # mean far from zero compared with the spread (one-pass variance fails)
        return rng.uniform(100, 1000, row_shape) * rng.choice([-1.0, 1.0], row_shape) + rng.normal(0, 1, shape)
    if family == "tiny":
        return rng.normal(0, 1, shape) * 1e-4
    if family == "ties":
        return rng.integers(-2, 3, shape) * 0.5 + 0.25
    if family == "huge":
        return rng.normal(0, 1, shape) * 1e30
    if family == "near_max":
        return np.clip(rng.normal(0, 1, shape) * dtype_max(dtype) / 8, -dtype_max(dtype), dtype_max(dtype))
    raise ValueError(f"unknown value family {family!r}")


def fill(rng: np.random.Generator, family: str, shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """An array of ``shape`` from ``family``, rounded to ``dtype`` (via float32, as engines store)."""
    if family in LOGIT_FAMILIES:
        rows = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
        seeds = rng.integers(0, 2**31, rows)
        x = np.stack([make_logits(family, shape[-1], int(s), dtype) for s in seeds]).reshape(shape)
        return x
    return _values(rng, family, shape, dtype).astype(np.float32).astype(DTYPES[dtype])


def ids(rng: np.random.Generator, n: int, shape: tuple[int, ...]) -> np.ndarray:
    return rng.integers(0, n, shape).astype(np.int64)
