"""Array plumbing shared by every sampler: backend choice, dtype conversion, validation,
per-row parameter broadcasting and row-subset application.

Nothing here knows sampler maths; it only enforces the package contract (see ``gpu_impl``).
"""
from __future__ import annotations

import functools
from types import ModuleType
from typing import Any, Callable

import numpy as np

from gpu_impl._deferred import check, on_host

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


def divide_rows(xp: ModuleType, x: Any, d: Any) -> Any:
    """``x / d[:, None]`` rounded as IEEE float32 on both backends (``d``: float32 [batch], on the
    host or on ``xp``). CuPy's division kernel flushes a subnormal divisor to 0, so a temperature
    of 7e-45 gave ±inf for every logit and NaN (0 / 0) for a zero one; a subnormal d is divided as
    d·2^24 (normal, exact from its bits) and the quotient multiplied back by 2^24: scaling by a
    power of two commutes with the rounding wherever the quotient is normal, and overflows where
    x / d does. NumPy divides as given."""
    if not is_cupy(xp) or d.dtype != np.float32:
        return x / d[:, None]
    host = on_host(d)
    dx = np if host else xp
    magnitude = d.view(dx.int32) & 0x7FFFFFFF
    tiny = (magnitude > 0) & (magnitude < 0x00800000)
    if host and not bool(tiny.any()):
        return x / xp.asarray(d)[:, None]
    scale = dx.where(tiny, dx.float32(2.0 ** 24), dx.float32(1))
    scaled = dx.where(tiny, (widen_exact(dx, d) * 2.0 ** 24).astype(dx.float32), d)
    return x / xp.asarray(scaled)[:, None] * xp.asarray(scale)[:, None]


def scaled_rows(xp: ModuleType, p: Any, m: Any) -> Any:
    """``p[:, None]·m[:, None]`` in float64 (p and m float32 [batch], p on the host or on ``xp``):
    the product of two float32 values, exact, so a threshold such as min_p·p_max is the same on
    both backends; in float32 on CuPy a subnormal p, or a product below 2^-126, is 0 there."""
    return (widen_exact(xp, xp.asarray(p)) * widen_exact(xp, m))[:, None]


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
    if on_device(xp, x):  # one fused read (gpu_impl.kernels.row_max), which also counts bad rows
        from gpu_impl.kernels import row_max as device_row_max
        x = xp.ascontiguousarray(x)
        row_max, bad = device_row_max(x)  # the count of bad rows is the flag (non-zero: fail)
    else:
        row_max = x.max(axis=1)  # NaN propagates through max, so one reduction finds NaN and +inf
        bad = ~(row_max < np.inf)
    check_row_max(xp, row_max, name, bad)
    return xp, x, row_max


def check_row_max(xp: ModuleType, row_max: Any, name: str = "logits", bad: Any = None) -> None:
    """The rows check of ``as_logits`` from the row max alone (NaN or +inf there means NaN or
    +inf in the row): for rows whose max a kernel already wrote. ``bad``: the flag, if known."""
    bad = ~(row_max < np.inf) if bad is None else bad
    check(bad, lambda: f"{name} rows {xp.nonzero(~(row_max < np.inf))[0].tolist()} contain NaN or +inf "
                       "(after conversion to float32)")


def require_candidates(xp: ModuleType, row_max: Any, fn: str) -> None:
    """Selection needs at least one finite logit per row."""
    empty = row_max == NEG_INF
    check(empty, lambda: f"{fn}: rows {xp.nonzero(empty)[0].tolist()} have no finite logit to select")


def param_xp(xp: ModuleType, value: Any) -> ModuleType:
    """Where to validate a per-row parameter: on the host when it was given there (its checks
    and the decisions taken on it then cost no device read), else on the logits' backend."""
    return np if on_host(value) else xp


def row_param(value: Any, batch: int, name: str, xp: ModuleType, *, integer: bool = False,
              dtype: Any = np.float32) -> Any:
    """A scalar or a length-``batch`` 1-D array, as a finite ``[batch]`` array on ``xp``."""
    if is_cupy(xp):
        if not on_host(value):
            arr = _device_row_param(value, batch, name, xp, integer, dtype)
            if arr is not None:
                return arr
            value = value.get()  # a conversion CuPy does not do exactly: on the host (one read)
        # validated and converted on the host, then uploaded: CuPy's conversion kernels flush
        # float32 subnormals to zero (a min_p of 1e-45 would arrive as 0 and switch it off)
        return xp.asarray(row_param(value, batch, name, np, integer=integer, dtype=dtype))
    if hasattr(value, "get"):
        value = value.get()  # a CuPy parameter with NumPy logits
    arr = _shaped(xp.asarray(value), batch, name, xp)
    if integer:
        if arr.dtype.kind == "f":
            if not bool(xp.isfinite(arr).all()) or not bool((arr == xp.floor(arr)).all()):
                raise ValueError(f"parameter {name} must be a finite integer, got {arr.tolist()}")
        return arr.astype(xp.int64)
    arr = arr.astype(dtype)
    if not bool(xp.isfinite(arr).all()):
        raise ValueError(f"parameter {name} must be finite (in {np.dtype(dtype).name}), got {arr.tolist()}")
    return arr


def _shaped(arr: Any, batch: int, name: str, xp: ModuleType) -> Any:
    """A numeric scalar or [batch] array as [batch] (dtype and shape are host metadata)."""
    if arr.dtype == bool or arr.dtype.kind not in "iuf":
        raise ValueError(f"parameter {name} must be numeric, got dtype {arr.dtype}")
    if arr.ndim == 0:
        return xp.broadcast_to(arr, (batch,))
    if arr.shape != (batch,):
        raise ValueError(f"parameter {name} has shape {tuple(arr.shape)} but batch is {batch}")
    return arr


def _device_row_param(value: Any, batch: int, name: str, xp: ModuleType, integer: bool, dtype: Any,
                      finite: bool = True) -> Any:
    """A CuPy parameter checked on the device (a deferred flag, no read), where CuPy converts it
    exactly: integers for an integer parameter, float32 kept as float32 or widened to float64,
    float64 kept. None for the other conversions (float64 -> float32 would flush subnormals).
    ``finite=False`` leaves the finiteness check to the caller's own flag."""
    arr = _shaped(value, batch, name, xp)
    if integer:
        return xp.ascontiguousarray(arr.astype(xp.int64)) if arr.dtype.kind in "iu" else None
    want = np.dtype(dtype)
    if arr.dtype == want and want in (np.float32, np.float64):
        conv = xp.ascontiguousarray(arr)
    elif arr.dtype == np.float32 and want == np.float64:
        conv = widen_exact(xp, xp.ascontiguousarray(arr))
    else:
        return None
    if finite:
        check(~xp.isfinite(conv), lambda: f"parameter {name} must be finite (in {want.name}), got {conv.tolist()}")
    return conv


def unit_param(value: Any, batch: int, name: str, xp: ModuleType, dtype: Any = np.float64) -> Any:
    """A uniform draw per row on ``xp``, checked to lie in [0, 1]: at once when given on the
    host (``xp=np`` keeps it there), by a deferred check when given on the device."""
    if is_cupy(xp) and not on_host(value):
        arr = _device_row_param(value, batch, name, xp, False, dtype, finite=False)
        if arr is not None:
            # one flag for both checks (NaN and inf fail the range test too); its message is the
            # host checks' own, run on the values once the call has failed
            w = widen_exact(xp, arr) if arr.dtype == np.float32 else arr  # CuPy compares float32 flushed
            check(~((w >= 0) & (w <= 1)), lambda: _host_error(lambda: unit_param(value.get(), batch, name, np, dtype)))
            return arr
    arr = row_param(value, batch, name, param_xp(xp, value), dtype=dtype)
    if on_host(arr):
        if not bool(((arr >= 0) & (arr <= 1)).all()):
            raise ValueError(f"parameter {name} must lie in [0, 1], got {arr.tolist()}")
        return xp.asarray(arr)
    w = widen_exact(xp, arr) if arr.dtype == np.float32 else arr
    check(~((w >= 0) & (w <= 1)), lambda: f"parameter {name} must lie in [0, 1], got {arr.tolist()}")
    return arr


def _host_error(validate: Callable[[], Any]) -> str:
    """The message of the host check that ``validate`` runs (a device flag said one fails)."""
    try:
        validate()
    except ValueError as e:
        return str(e)
    raise AssertionError("a device check failed where the host check passes")


def nonneg(xp: ModuleType, arr: Any, name: str) -> Any:
    """``arr`` (a validated parameter), refused where negative: at once on the host, deferred
    on the device."""
    if on_host(arr):
        if bool((arr < 0).any()):
            raise ValueError(f"parameter {name} must be >= 0, got {arr.tolist()}")
        return arr
    check(arr < 0, lambda: f"parameter {name} must be >= 0, got {arr.tolist()}")
    return arr


def on_rows(xp: ModuleType, x: Any, active: Any, fn: Callable[[Any, Any], Any]) -> Any:
    """Apply ``fn(sub, sel)`` to the active rows only; inactive rows come back bit-identical.

    ``sel`` indexes the per-row parameters of the rows in ``sub`` (on ``xp``). Working on a row
    subset (rather than computing everywhere and blending) keeps no-op rows exact and cheap.
    An ``active`` on the host (decided from host parameters) costs no device read; one on the
    device costs up to three.
    """
    host = on_host(active)
    act = np.asarray(active) if host else active
    if not bool(act.any()):
        return x.copy()
    if bool(act.all()):
        return fn(x, slice(None))
    idx = xp.asarray(np.nonzero(act)[0]) if host else xp.nonzero(act)[0]
    out = x.copy()
    out[idx] = fn(x[idx], idx)
    return out


def drop(xp: ModuleType, x: Any, mask: Any) -> Any:
    """A new array with the ``mask`` positions set to -inf."""
    return xp.where(mask, NEG_INF, x)
