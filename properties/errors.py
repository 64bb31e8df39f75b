"""Error models in units of the compute dtype's unit roundoff u, and may/must brackets.

Nothing here is a magic atol. Each bound names the arithmetic it covers:

- softmax in fp32: ``x - max`` is rounded (relative error u·|x - max| after exp), exp adds a few u,
  the sum of n terms adds at most ceil(log2 n) u for the pairwise/tree sums NumPy and CuPy use,
  the division one more. Per element: |p^ - p| <= u·p·(|x - max| + ceil(log2 n) + 6), plus an
  absolute 2^-148 for results in the subnormal range (where relative error is meaningless).
- cumulative mass (top-p, typical, xtc, dist): a sequential fp32 prefix sum of k terms is within
  k·u of the exact one, so a threshold decision may go either way within
  ``mass_allowance(k, n)`` = (2k + ceil(log2 n) + 8)·u of the boundary.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

U32 = 2.0**-24
SUBNORMAL_FLOOR = 2.0**-148


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
    scale = u * np.maximum(p, 2.0**-126)
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
    scale = u * np.maximum(np.abs(out64), np.finfo(np.float32).tiny)
    with np.errstate(invalid="ignore"):
        err_u = np.where(finite, np.abs(out_hat - out64) / np.where(finite, scale, 1.0), 0.0)
    allowed = np.broadcast_to(allowed_u, out64.shape)
    i = int(np.argmax(err_u / allowed))
    return ErrorReport(float(err_u[i]), float(allowed[i]), i)


def bracket(sets: list[np.ndarray], key: np.ndarray | None, eps: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """(must, may) survivor masks from oracle runs at the extreme legal parameters.

    ``must`` = kept by every run, minus tokens within ``eps`` of some token outside it (a tie or
    near-tie may resolve either way); ``may`` = kept by some run, plus tokens within ``eps`` of the
    weakest token inside it. ``key`` is the value the filter ranks by (None: no tie expansion).
    """
    must = np.logical_and.reduce(sets)
    may = np.logical_or.reduce(sets)
    if key is None:
        return must, may
    finite = np.isfinite(key)
    outside = finite & ~must
    if outside.any() and must.any():
        must = must & (key > key[outside].max() + eps)
    if may.any():
        may = may | (finite & (key >= key[may].min() - eps))
    return must, may


def describe_set_violation(kept: np.ndarray, must: np.ndarray, may: np.ndarray) -> str | None:
    """None if must ⊆ kept ⊆ may, else which tokens break it."""
    missing = np.flatnonzero(must & ~kept)
    extra = np.flatnonzero(kept & ~may)
    if missing.size == 0 and extra.size == 0:
        return None
    parts = []
    if missing.size:
        parts.append(f"dropped {missing.size} token(s) the oracle must keep, e.g. ids {missing[:6].tolist()}")
    if extra.size:
        parts.append(f"kept {extra.size} token(s) the oracle may not keep, e.g. ids {extra[:6].tolist()}")
    return "; ".join(parts) + f" (must={int(must.sum())}, may={int(may.sum())}, kept={int(kept.sum())})"
