"""Backend plumbing for the ops: which array module owns an input, float32 widening (bf16 as
raw bits on CuPy), and argument checks that raise ValueError with the problem named."""
from __future__ import annotations

import functools
import math
from types import ModuleType
from typing import Any

import numpy as np

# exp(-inf - -inf), 0 * inf and friends are masked afterwards; NumPy should not warn about them
quiet = functools.partial(np.errstate, all="ignore")


@functools.lru_cache(maxsize=1)
def _cupy() -> ModuleType | None:
    try:
        import cupy
    except Exception:  # no wheel, or a CUDA runtime that cannot load: NumPy only
        return None
    return cupy


def array_module(*arrays: Any) -> ModuleType:
    """``cupy.get_array_module`` when CuPy imports, else NumPy."""
    cp = _cupy()
    return cp.get_array_module(*arrays) if cp is not None else np


def special(xp: ModuleType) -> ModuleType:
    """scipy.special for NumPy arrays, cupyx.scipy.special for CuPy arrays."""
    if xp is np:
        from scipy import special as sp
    else:
        from cupyx.scipy import special as sp
    return sp


def f32(xp: ModuleType, x: Any, name: str) -> Any:
    """``x`` as float32 (exact for fp16 and bf16; bf16 is ``ml_dtypes.bfloat16`` on both backends)."""
    if not hasattr(x, "dtype"):
        x = xp.asarray(x)
    kind = x.dtype.name
    if kind == "float32":
        return x
    if kind == "bfloat16":
        return (x.view(xp.uint16).astype(xp.uint32) << 16).view(xp.float32)  # bf16 is the top half of an fp32
    if kind in ("float16", "float64"):
        return x.astype(xp.float32)
    raise ValueError(f"{name} must be float16, bfloat16 or float32, got dtype {x.dtype}")


def ints(xp: ModuleType, x: Any, name: str, ndim: int | None = None) -> Any:
    a = xp.asarray(x)
    if a.dtype.kind not in "iu":
        raise ValueError(f"{name} must be an integer array, got dtype {a.dtype}")
    if ndim is not None and a.ndim != ndim:
        raise ValueError(f"{name} must be {ndim}-D, got shape {tuple(a.shape)}")
    return a.astype(xp.int64)


def ndim(x: Any, n: int, name: str) -> None:
    if x.ndim != n:
        raise ValueError(f"{name} must be {n}-D, got shape {tuple(x.shape)}")


def scalar(v: Any, name: str, *, above: float | None = None, at_least: float | None = None) -> float:
    f = float(v)
    if not math.isfinite(f):
        raise ValueError(f"{name} must be finite, got {v!r}")
    if above is not None and not f > above:
        raise ValueError(f"{name} must be > {above}, got {v!r}")
    if at_least is not None and not f >= at_least:
        raise ValueError(f"{name} must be >= {at_least}, got {v!r}")
    return f


def count(v: Any, name: str) -> int:
    if int(v) != v or int(v) < 1:
        raise ValueError(f"{name} must be a positive integer, got {v!r}")
    return int(v)
