"""Errors measured in units of u: the worst element of an implementation's output against the
allowance an error model of ``properties.numerics`` gives there (``ErrorReport``), the softmax check
every sampler shares, and the Higham-Mary gate on a case's whole error distribution. The models
live in ``numerics``; this module only measures against them."""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from properties.numerics import (F32_MAX, F32_TINY, FTZ_FLOOR, SUBNORMAL_FLOOR, U32, Contract, active_contract,
                                 log2n, softmax_model)


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


def check_softmax(p_hat: np.ndarray, row64: np.ndarray, c: Contract | None = None) -> tuple[ErrorReport, str | None]:
    """An fp32 softmax of ``row64``'s finite entries, in two parts: ratios p^_i/p^_max against
    exp(l_i - l_max) within u·(|d_i| + exp_u(d_i) + 2) (+ FTZ_FLOOR absolute), then |Σp^ - 1| within θ.
    Returns the worse report (in u) and why it fails, or None."""
    c = c or active_contract()
    m = softmax_model(row64, c)
    ph = np.asarray(p_hat, dtype=np.float64)
    if not m.finite.any():
        return ErrorReport(0.0, 0.0, 0), None
    if not np.isfinite(ph).all() or (ph[~m.finite] != 0).any():
        i = int(np.flatnonzero(~np.isfinite(ph) | (~m.finite & (ph != 0)))[0])
        return ErrorReport(math.inf, 0.0, i), f"probability {ph[i]!r} at index {i} (logit {row64[i]!r})"
    top = int(np.argmax(np.where(m.finite, row64, -np.inf)))
    if ph[top] <= 0:
        return ErrorReport(math.inf, 0.0, top), f"the most probable token {top} has probability {ph[top]!r}"
    r = np.exp(m.d)
    allowed = r * U32 * m.elementwise_u + FTZ_FLOOR / ph[top]
    err = np.where(m.finite, np.abs(ph / ph[top] - r), 0.0)
    i = int(np.argmax(err / allowed))
    unit = U32 * np.maximum(r[i], F32_TINY)
    ratio = ErrorReport(float(err[i] / unit), float(allowed[i] / unit), i)
    total = float(ph.sum())
    norm = ErrorReport(abs(total - 1) / U32, m.theta / U32, -1)
    if not ratio.ok:
        return ratio, (f"p[{i}]/p[{top}] = {ph[i] / ph[top]:.9g}, exp(l_i - l_max) = {r[i]:.9g}: "
                       f"{ratio.worst_u:.3g} u, the order-free model allows {ratio.bound_u:.3g} u")
    if not norm.ok:
        return norm, (f"Σp = {total!r}: |Σp - 1| = {norm.worst_u:.3g} u, the {c.name} contract's "
                      f"normaliser allows {norm.bound_u:.3g} u (n = {int(m.finite.sum())})")
    return max(ratio, norm, key=lambda rep: rep.ratio), None


# --- the probabilistic gate -----------------------------------------------------------------

HM_LAMBDA = 1.0
"""Gate: the 99th percentile of err/(√n·u·Σ|x|) over a case's outputs may not exceed λ = 1.
Under Higham-Mary's model (independent mean-zero roundings) a sum of n signed terms errs by
u·(Σ_k T_k²)^½ in root mean square, T_k the partial sums; for terms of random sign T_k ~ √k·σ,
so err/(√n·u·Σ|x|) ~ 0.6/√n (normal operands), far below 1 once n >= 1,000 (measured on every
conforming engine and family: <= 0.14 at K = 1,000, <= 0.058 at K = 4,096), while an operand
rounded to 10 or 8 bits gives ~2^-11/u/(0.64·n)·√… >= 2.9 at K = 4,096. Below HM_MIN_N the worst
case γ_n is already tight enough and the gate is off; it applies only where the strategy
draws terms of random sign."""
HM_QUANTILE = 0.99
HM_MIN_N = 1000


def hm_gate(err_u: np.ndarray, n: int, lam: float = HM_LAMBDA) -> tuple[float, bool]:
    """(the gate statistic, whether it passes): ``err_u`` is each output's error in units of
    u·Σ|x| of that output; the statistic is their 99th percentile over √n."""
    if n < HM_MIN_N or np.size(err_u) == 0:
        return 0.0, True
    stat = float(np.quantile(np.asarray(err_u, dtype=np.float64), HM_QUANTILE) / math.sqrt(n))
    return stat, stat <= lam


# --- error measurements in units of u --------------------------------------------------------

def softmax_error(p_hat: np.ndarray, logits64: np.ndarray, u: float = U32) -> ErrorReport:
    """Whole-p relative error against the float64 softmax with a tree normaliser (⌈log2 n⌉ + 6):
    the GPU kernels' own model (properties/gpu), not a contract the samplers are judged by."""
    finite = np.isfinite(logits64)
    m = logits64[finite].max()
    e = np.where(finite, np.exp(logits64 - m), 0.0)
    p = e / e.sum()
    diff = np.abs(p_hat.astype(np.float64) - p)
    if not np.isfinite(diff).all():  # NaN or inf where p is finite: no bound covers it
        i = int(np.flatnonzero(~np.isfinite(diff))[0])
        return ErrorReport(math.inf, 0.0, i)
    model = np.where(finite, np.abs(np.where(finite, logits64, m) - m), 0.0) + log2n(int(finite.sum())) + 6
    allowed = u * model * p + SUBNORMAL_FLOOR
    scale = u * np.maximum(p, F32_TINY)
    ratio = diff / allowed
    i = int(np.argmax(ratio))
    return ErrorReport(float(diff[i] / scale[i]), float(allowed[i] / scale[i]), i)


def elementwise_error(out_hat: np.ndarray, out64: np.ndarray, allowed_u: np.ndarray, u: float = U32) -> ErrorReport:
    """|out^ - out| against ``allowed_u`` units of u·|out| per element. Non-finite values must
    match exactly (NaN with NaN, each infinity with itself): a non-finite output where the oracle
    is finite, or the reverse, is an error of infinite size - a NaN is not a small error."""
    out_hat = np.asarray(out_hat, dtype=np.float64)
    out64 = np.asarray(out64, dtype=np.float64)
    allowed = np.broadcast_to(allowed_u, out64.shape)
    finite_hat, finite = np.isfinite(out_hat), np.isfinite(out64)
    same_nonfinite = (np.isnan(out_hat) & np.isnan(out64)) | (np.isinf(out_hat) & (out_hat == out64))
    mismatch = (finite_hat != finite) | (~finite & ~finite_hat & ~same_nonfinite)
    if mismatch.any():
        i = int(np.flatnonzero(mismatch)[0])
        return ErrorReport(math.inf, float(allowed.reshape(-1)[i]), i)
    scale = u * np.maximum(np.abs(out64), F32_TINY)
    with np.errstate(invalid="ignore"):
        err_u = np.where(finite, np.abs(out_hat - out64) / np.where(finite, scale, 1.0), 0.0)
    i = int(np.argmax(err_u / allowed))
    return ErrorReport(float(err_u.reshape(-1)[i]), float(allowed.reshape(-1)[i]), i)


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
