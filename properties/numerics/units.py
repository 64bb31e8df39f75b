"""Units of the numerics model, in u = eps/2.

Units: ``unit_roundoff`` (u of float64/32/16, bfloat16), γ_k = k·u/(1 - k·u), ``ulp``, the
elementary functions' allowances ``FN_U`` (twice CUDA's documented single-precision maximum ulp
error; 1 ulp <= 2u): expf 2, logf 1, tanhf 2, sinf/cosf 2, erff 2, hypotf 3, powf 4 ulp; and
``METAL_FN_U``, Metal's precise functions (the Metal Shading Language specification's Table 8.1).
"""
from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np


def unit_roundoff(dtype: Any) -> float:
    """u = eps/2 of ``dtype`` (a name such as "bfloat16", or a NumPy dtype)."""
    name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    return float(ml_dtypes.finfo(getattr(ml_dtypes, name, None) or np.dtype(name)).eps) / 2


U64 = unit_roundoff("float64")   # 2^-53
U32 = unit_roundoff("float32")   # 2^-24
U16 = unit_roundoff("float16")   # 2^-11
UBF16 = unit_roundoff("bfloat16")  # 2^-8

F32_MAX = float(np.finfo(np.float32).max)
F32_TINY = float(np.finfo(np.float32).tiny)  # 2^-126, the smallest normal float32
F32_MIN_SUBNORMAL = 2.0**-149
SUBNORMAL_FLOOR = 2.0**-148  # absolute error floor of results in the subnormal range
FTZ_FLOOR = F32_TINY  # results below the normal range may be flushed to zero (fast-math kernels)

FN_U = {"exp": 4.0, "log": 2.0, "tanh": 4.0, "sincos": 4.0, "erf": 4.0, "hypot": 6.0, "pow": 8.0}
METAL_FN_U = {"exp": 8.0, "log": 8.0, "tanh": 10.0, "sincos": 8.0, "pow": 32.0}
"""Metal's precise single-precision functions in u (MSL 4.1 §8.4, Table 8.1: what ``-fno-fast-math``
builds and the ``metal::precise`` namespace give, MLX's kernels among them): exp / exp2 / log / log2
4 ulp, tanh 5, sin / cos 4, pow 16; division, 1.0 / x and rsqrt correctly rounded."""
METAL_FAST_LOG_ABS = 2.0 ** -21
"""Metal's fast-math ``log``'s absolute error for arguments in [0.5, 2] (MSL 4.1 Table 8.2, the
Metal compiler's default mode; 3 ulp elsewhere; ``log2``: 2^-22, 2 ulp)."""
FAST_LOGF_ABS = 2.0 ** -21.41
"""``__logf``'s documented absolute error for arguments in [0.5, 2] (``logf`` under -use_fast_math;
3 ulp elsewhere): the CUDA programming guide's table of intrinsic functions."""
FAST_SINCOS_ABS = 2.0 ** -21.41
"""``__sinf`` / ``__cosf``'s documented absolute error on [-π, π] (none is documented outside)."""


def ulp32(x: Any) -> np.ndarray:
    """Elementwise float32 spacing of the binade an exact value lies in (2u·2^floor(log2 |x|);
    rounding x to float32 first could carry it into the next binade, of twice the spacing)."""
    a = np.abs(np.asarray(x, dtype=np.float64))
    with np.errstate(divide="ignore"):
        e = np.floor(np.log2(np.where(a > 0, a, F32_TINY)))
    return 2 * U32 * np.exp2(np.maximum(e, -126.0))


def gamma(k: float, u: float = U32) -> float:
    """γ_k = k·u/(1 - k·u): |fl(Σ) - Σ| <= γ_k·Σ|terms| for k roundings in a row."""
    return k * u / (1 - k * u)


def ulp(x: float, dtype: Any = "float32") -> float:
    """Spacing of ``dtype``'s numbers at |x| (at 1 for x = 0): 2u·2^floor(log2 |x|)."""
    return 2 * unit_roundoff(dtype) * 2.0 ** np.floor(np.log2(abs(x) or 1.0))


def log2n(n: int) -> int:
    return max(1, math.ceil(math.log2(max(n, 2))))
