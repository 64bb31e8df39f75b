"""The one place where the suite's floating-point constants and shared error-model blocks live.

Every domain (samplers, ops, quants, engines, peers) states its error models in units of the
compute dtype's unit roundoff u = eps/2, and imports u from here instead of writing 2^-24 again.

- ``unit_roundoff(dtype)``: u for float64, float32, float16 and bfloat16 (ml_dtypes knows bf16).
- ``gamma(k, u)``: γ_k = k·u/(1 - k·u), the order-free bound on a sum or dot product of k terms.
- ``ulp(x, dtype)``: the spacing of ``dtype``'s numbers at |x|.
- ``ErrorReport`` and the "error in units of u" measurements: ``softmax_error`` (a probability
  vector against the float64 softmax), ``elementwise_error`` (relative, per element) and
  ``scaled_error`` (against a model's own per-element scale, with a flush-to-zero floor).
- ``mass_allowance``: how far a cumulative-mass threshold decision may sit from the exact one.
- ``FN_U``: the elementary functions' allowances (twice CUDA's documented single-precision
  maximum ulp error; 1 ulp <= 2u): expf 2, logf 1, tanhf 2, sinf/cosf 2, erff 2, hypotf 3.

The softmax model: ``x - max`` is rounded (relative error u·|x - max| after exp), exp adds a
few u, the sum of n terms adds at most ceil(log2 n) u for the pairwise/tree sums NumPy and CuPy
use, the division one more. Per element |p^ - p| <= u·p·(|x - max| + ceil(log2 n) + 6), plus
an absolute 2^-148 for results in the subnormal range (where relative error is meaningless).
A sequential fp32 prefix sum of k terms is within k·u of the exact one, so a cumulative-mass
decision may go either way within (2k + ceil(log2 n) + 8)·u of its threshold.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
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
SUBNORMAL_FLOOR = 2.0**-148  # absolute error floor of the softmax model in the subnormal range
FTZ_FLOOR = F32_TINY  # results below the normal range may be flushed to zero (fast-math kernels)

FN_U = {"exp": 4.0, "log": 2.0, "tanh": 4.0, "sincos": 4.0, "erf": 4.0, "hypot": 6.0}


def gamma(k: float, u: float = U32) -> float:
    """γ_k = k·u/(1 - k·u): |fl(Σ) - Σ| <= γ_k·Σ|terms| for any order of k additions."""
    return k * u / (1 - k * u)


def ulp(x: float, dtype: Any = "float32") -> float:
    """Spacing of ``dtype``'s numbers at |x| (at 1 for x = 0): 2u·2^floor(log2 |x|)."""
    return 2 * unit_roundoff(dtype) * 2.0 ** np.floor(np.log2(abs(x) or 1.0))


def log2n(n: int) -> int:
    return max(1, math.ceil(math.log2(max(n, 2))))


def mass_allowance(k: int, n: int, u: float = U32) -> float:
    """How far a cumulative-probability decision may sit from the exact boundary."""
    return (2 * k + log2n(n) + 8) * u


@dataclass(frozen=True)
class ErrorReport:
    """Worst element: its error in units of u and the model's allowance there."""

    worst_u: float
    bound_u: float
    index: int

    @property
    def ratio(self) -> float:
        return self.worst_u / self.bound_u if self.bound_u else (0.0 if self.worst_u == 0 else math.inf)

    @property
    def ok(self) -> bool:
        return self.ratio <= 1.0

    def describe(self) -> str:
        return f"worst error {self.worst_u:.3g} u at index {self.index} (model allows {self.bound_u:.3g} u)"


def softmax_error(p_hat: np.ndarray, logits64: np.ndarray, u: float = U32) -> ErrorReport:
    """Compare an fp32 softmax (over the finite entries of ``logits64``) with the float64 one."""
    finite = np.isfinite(logits64)
    m = logits64[finite].max()
    e = np.where(finite, np.exp(logits64 - m), 0.0)
    p = e / e.sum()
    diff = np.abs(p_hat.astype(np.float64) - p)
    model = np.where(finite, np.abs(np.where(finite, logits64, m) - m), 0.0) + log2n(int(finite.sum())) + 6
    allowed = u * model * p + SUBNORMAL_FLOOR
    scale = u * np.maximum(p, F32_TINY)
    ratio = diff / allowed
    i = int(np.argmax(ratio))
    return ErrorReport(float(diff[i] / scale[i]), float(allowed[i] / scale[i]), i)


def elementwise_error(out_hat: np.ndarray, out64: np.ndarray, allowed_u: np.ndarray, u: float = U32) -> ErrorReport:
    """|out^ - out| against ``allowed_u`` units of u·|out| per element (infinities must match)."""
    out_hat = out_hat.astype(np.float64)
    inf_mismatch = np.isinf(out64) != np.isinf(out_hat)
    if inf_mismatch.any():
        i = int(np.flatnonzero(inf_mismatch)[0])
        return ErrorReport(math.inf, float(np.broadcast_to(allowed_u, out64.shape)[i]), i)
    finite = np.isfinite(out64) & np.isfinite(out_hat)
    scale = u * np.maximum(np.abs(out64), F32_TINY)
    with np.errstate(invalid="ignore"):
        err_u = np.where(finite, np.abs(out_hat - out64) / np.where(finite, scale, 1.0), 0.0)
    allowed = np.broadcast_to(allowed_u, out64.shape)
    i = int(np.argmax(err_u / allowed))
    return ErrorReport(float(err_u[i]), float(allowed[i]), i)


def nonfinite_mismatch(out: np.ndarray, exact: np.ndarray) -> str | None:
    """None if NaN and ±inf sit in the same places with the same signs, else where they do not."""
    o_nan, e_nan = np.isnan(out), np.isnan(exact)
    o_inf, e_inf = np.isinf(out), np.isinf(exact)
    bad = (o_nan != e_nan) | (o_inf != e_inf) | (e_inf & (np.sign(out) != np.sign(exact)))
    if not bad.any():
        return None
    i = np.unravel_index(int(np.flatnonzero(bad)[0]), exact.shape)
    return (f"non-finite pattern differs at {tuple(int(j) for j in i)}: impl {out[i]!r}, oracle {exact[i]!r} "
            f"({int(bad.sum())} element(s))")


def scaled_error(out: Any, exact: Any, scale: Any, bound_u: Any, u: float = U32
                 ) -> tuple[ErrorReport, np.ndarray, str | None]:
    """An fp32 result against the float64 one in units of u·scale: (worst element's report,
    err_u of every finite element, why-it-failed or None).

    err_u = max(|out - exact| - FTZ_FLOOR, 0) / (u·scale). Non-finite outputs must match the
    oracle's exactly; an exact value beyond fp32's largest finite may come out as that infinity.
    """
    o = np.asarray(out, dtype=np.float64)
    e = np.asarray(exact, dtype=np.float64)
    if o.shape != e.shape:
        return ErrorReport(np.inf, 0.0, 0), np.zeros(0), f"shape {o.shape}, oracle {e.shape}"
    # an exact value past fp32's largest finite rounds to infinity: that inf is the right answer
    rounds_to_inf = np.isinf(o) & np.isfinite(e) & (np.abs(e) >= F32_MAX) & (np.sign(o) == np.sign(e))
    e = np.where(rounds_to_inf, o, e)
    why = nonfinite_mismatch(o, e)
    if why:
        return ErrorReport(np.inf, 0.0, 0), np.zeros(0), why
    fin = np.isfinite(e)
    sc = np.broadcast_to(np.asarray(scale, dtype=np.float64), e.shape)[fin]
    bd = np.broadcast_to(np.asarray(bound_u, dtype=np.float64), e.shape)[fin]
    excess = np.maximum(np.abs(o[fin] - e[fin]) - FTZ_FLOOR, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        err = np.where(excess == 0, 0.0, excess / (u * sc))
        ratio = np.where(err == 0, 0.0, err / bd)
    if err.size == 0:
        return ErrorReport(0.0, 0.0, 0), err, None
    i = int(np.argmax(ratio))
    flat = int(np.flatnonzero(fin.ravel())[i])
    rep = ErrorReport(float(err[i]), float(bd[i]), flat)
    if rep.ok:
        return rep, err, None
    where = tuple(int(j) for j in np.unravel_index(flat, e.shape))
    return rep, err, (f"error {err[i]:.4g} u at {where} exceeds the model's {bd[i]:.4g} u "
                      f"(impl {o.ravel()[flat]!r}, oracle {e.ravel()[flat]!r}, scale {sc[i]:.4g})")
