"""Array plumbing shared by every sampler: backend choice, dtype conversion, validation,
per-row parameter broadcasting and row-subset application.

Nothing here knows sampler maths; it only enforces the package contract (see ``gpu_impl``).
"""
from __future__ import annotations

import functools
from types import ModuleType
from typing import Any, Callable

import numpy as np

NEG_INF = np.float32(-np.inf)

# NumPy warns on exp(-inf - -inf), log(0) and 0 * inf; every such case is masked afterwards.
quiet = functools.partial(np.errstate, all="ignore")


@functools.lru_cache(maxsize=1)
def _cupy() -> ModuleType | None:
    try:
        import cupy
    except Exception:  # a missing wheel or a CUDA runtime that fails to load: NumPy only
        return None
    return cupy


def get_xp(x: Any) -> ModuleType:
    """The array module that owns ``x``; CuPy is only imported for non-NumPy objects."""
    if isinstance(x, (np.ndarray, np.generic, int, float, list, tuple)):
        return np
    cp = _cupy()
    return cp.get_array_module(x) if cp is not None else np


def is_cupy(xp: ModuleType) -> bool:
    return xp is not np


def above_zero(xp: ModuleType, a: Any) -> Any:
    """``a > 0``, exact on both backends. CuPy compiles its elementwise kernels with
    flush-to-zero, so a subnormal float32 parameter (p = 1e-45 is a legal min_p) compares as 0
    there; the bit pattern of a float32 orders it exactly (positive floats are positive ints)."""
    if is_cupy(xp) and a.dtype == xp.float32:
        return a.view(xp.int32) > 0
    return a > 0


def widen_exact(xp: ModuleType, a: Any) -> Any:
    """float32 -> float64, exact for subnormals on both backends (CuPy's conversion kernel
    flushes a subnormal float32 to zero; its significand times 2^-149 is exact in float64)."""
    if not is_cupy(xp):
        return a.astype(np.float64)
    bits = a.view(xp.int32)
    tiny = (bits & 0x7F800000) == 0
    sign = xp.where(bits < 0, -1.0, 1.0)
    return xp.where(tiny, sign * (bits & 0x7FFFFF).astype(xp.float64) * 2.0 ** -149, a.astype(xp.float64))


def on_device(xp: ModuleType, x: Any) -> bool:
    """Take the fused-kernel path (``gpu_impl.kernels``): CuPy rows of a shape the kernels take."""
    if not is_cupy(xp):
        return False
    from gpu_impl.kernels import fits
    return fits(tuple(x.shape))


def bf16_bits_to_f32(xp: ModuleType, bits: Any) -> Any:
    # bf16 is the top half of an fp32, so widening the bits is exact and needs no bf16 arithmetic
    return (bits.astype(xp.uint32) << 16).view(xp.float32)


def _to_float32(xp: ModuleType, x: Any, name: str) -> Any:
    if x.dtype == xp.float32:
        return x  # callers never write into their input, so no defensive copy
    if x.dtype.name == "bfloat16":  # ml_dtypes.bfloat16, on NumPy and on CuPy (>= 14) alike
        return bf16_bits_to_f32(xp, x.view(xp.uint16))
    if x.dtype in (xp.float16, xp.float64):
        return x.astype(xp.float32)
    raise ValueError(f"{name} must be float32, float16, bfloat16 or float64, got dtype {x.dtype}")


def as_logits(logits: Any, name: str = "logits") -> tuple[ModuleType, Any, Any]:
    """Validate ``logits`` and return ``(xp, float32 [B, V] array, row max [B])``."""
    xp = get_xp(logits)
    x = logits if hasattr(logits, "dtype") and hasattr(logits, "shape") else np.asarray(logits)
    if x.ndim != 2:
        raise ValueError(f"{name} must be 2-D [batch, vocab], got shape {tuple(x.shape)}")
    if x.shape[0] < 1 or x.shape[1] < 1:
        raise ValueError(f"{name} must have batch >= 1 and vocab >= 1, got shape {tuple(x.shape)}")
    x = _to_float32(xp, x, name)
    if on_device(xp, x):  # one fused read (gpu_impl.kernels.row_max); one word comes back
        from gpu_impl.kernels import row_max as device_row_max
        x = xp.ascontiguousarray(x)
        row_max, n_bad = device_row_max(x)
        any_bad = int(n_bad) > 0
    else:
        row_max = x.max(axis=1)  # NaN propagates through max, so one reduction finds NaN and +inf
        any_bad = bool((~(row_max < np.inf)).any())
    if any_bad:
        rows = xp.nonzero(~(row_max < np.inf))[0].tolist()
        raise ValueError(f"{name} rows {rows} contain NaN or +inf (after conversion to float32)")
    return xp, x, row_max


def require_candidates(xp: ModuleType, row_max: Any, fn: str) -> None:
    """Selection needs at least one finite logit per row."""
    empty = row_max == NEG_INF
    if bool(empty.any()):
        rows = xp.nonzero(empty)[0].tolist()
        raise ValueError(f"{fn}: rows {rows} have no finite logit to select")


def row_param(value: Any, batch: int, name: str, xp: ModuleType, *, integer: bool = False,
              dtype: Any = np.float32) -> Any:
    """A scalar or a length-``batch`` 1-D array, as a finite ``[batch]`` array on ``xp``."""
    if is_cupy(xp):
        # validated and converted on the host, then uploaded: CuPy's conversion kernels flush
        # float32 subnormals to zero (a min_p of 1e-45 would arrive as 0 and switch it off)
        host = value.get() if hasattr(value, "get") else value
        return xp.asarray(row_param(host, batch, name, np, integer=integer, dtype=dtype))
    if hasattr(value, "get"):
        value = value.get()  # a CuPy parameter with NumPy logits
    arr = xp.asarray(value)
    if arr.dtype == bool or arr.dtype.kind not in "iuf":
        raise ValueError(f"parameter {name} must be numeric, got dtype {arr.dtype}")
    if arr.ndim == 0:
        arr = xp.broadcast_to(arr, (batch,))
    elif arr.shape != (batch,):
        raise ValueError(f"parameter {name} has shape {tuple(arr.shape)} but batch is {batch}")
    if integer:
        if arr.dtype.kind == "f":
            if not bool(xp.isfinite(arr).all()) or not bool((arr == xp.floor(arr)).all()):
                raise ValueError(f"parameter {name} must be a finite integer, got {arr.tolist()}")
        return arr.astype(xp.int64)
    arr = arr.astype(dtype)
    if not bool(xp.isfinite(arr).all()):
        raise ValueError(f"parameter {name} must be finite (in {np.dtype(dtype).name}), got {arr.tolist()}")
    return arr


def unit_param(value: Any, batch: int, name: str, xp: ModuleType, dtype: Any = np.float64) -> Any:
    """A uniform draw per row, checked to lie in [0, 1]."""
    arr = row_param(value, batch, name, xp, dtype=dtype)
    if not bool(((arr >= 0) & (arr <= 1)).all()):
        raise ValueError(f"parameter {name} must lie in [0, 1], got {arr.tolist()}")
    return arr


def nonneg(xp: ModuleType, arr: Any, name: str) -> Any:
    if bool((arr < 0).any()):
        raise ValueError(f"parameter {name} must be >= 0, got {arr.tolist()}")
    return arr


def on_rows(xp: ModuleType, x: Any, active: Any, fn: Callable[[Any, Any], Any]) -> Any:
    """Apply ``fn(sub, sel)`` to the active rows only; inactive rows come back bit-identical.

    ``sel`` indexes the per-row parameters of the rows in ``sub``. Working on a row subset
    (rather than computing everywhere and blending) keeps no-op rows exact and cheap.
    """
    if not bool(active.any()):
        return x.copy()
    if bool(active.all()):
        return fn(x, slice(None))
    idx = xp.nonzero(active)[0]
    out = x.copy()
    out[idx] = fn(x[idx], idx)
    return out


def drop(xp: ModuleType, x: Any, mask: Any) -> Any:
    """A new array with the ``mask`` positions set to -inf."""
    return xp.where(mask, NEG_INF, x)
