"""Running-error bounds of a peer's known float32 loops (llama.cpp's, in its order).

First-order running-error bounds for one *known* float32 computation (llama.cpp's loops, in its
order), so the float64 oracle can say how far that peer may legitimately land from it. Unlike
the contract's bounds (``nonnegative_sums``, ``softmax``, ``cdf``: any order an implementation may
choose), these follow the data:

- a sequential float sum s_j = fl(s_{j-1} + t_j) (softmax's ``cum_sum``, top-p/typical
  cumulative mass, entropies) errs by at most sum_j min(u·|s_j|, |t_j|, |s_{j-1}|): one rounding
  per addition, and a rounded sum is never further from the exact one than either operand is
  (both are representable candidates);
- ``expf(fl(l - max))``: the subtraction's rounding moves the exponent by <= u·|l - max|, expf
  adds <= 1 ulp (2u), so e carries a relative error u·(|l - max| + 2), plus an absolute 2^-149
  once it is subnormal;
- ``logf``/``log2f``/``powf``: <= 1 ulp (2u relative) each.

Second-order terms (products of two u-sized errors) are dropped; every bound says which float32
operations it covers; the smallest positive float32 is the absolute floor of subnormal results.
"""
from __future__ import annotations

import numpy as np

from .units import F32_MIN_SUBNORMAL, U32


def _f32_exact(x: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        return np.asarray(x, dtype=np.float64).astype(np.float32).astype(np.float64) == x


def seq_sum_bound(terms: np.ndarray, exact: np.ndarray | None = None) -> np.ndarray:
    """Running bound on |fl-sum - sum| after each term of a sequential float32 sum (same shape).

    ``exact`` marks terms known without error: while every term so far is exact and each
    partial sum is a float32 number, the additions are exact too (bound 0).
    """
    t = np.asarray(terms, dtype=np.float64)
    if t.size == 0:
        return t
    s = np.cumsum(t)
    step = np.abs(s)
    step *= U32
    np.minimum(step, np.abs(t), out=step)
    np.minimum(step[1:], np.abs(s[:-1]), out=step[1:])
    step[0] = 0.0  # the first addition is 0 + t_0: exact
    if exact is not None:
        step[:_clean_prefix(np.asarray(exact, dtype=bool), s)] = 0.0
    return np.cumsum(step, out=step)


def _clean_prefix(exact: np.ndarray, s: np.ndarray) -> int:
    """Length of the prefix where every term is exact and every partial sum a float32 number:
    scanned in doubling chunks, since it usually ends within the first few terms."""
    n, start, width = s.size, 0, 64
    while start < n:
        stop = min(start + width, n)
        bad = np.flatnonzero(~(exact[start:stop] & _f32_exact(s[start:stop])))
        if bad.size:
            return start + int(bad[0])
        start, width = stop, 2 * width
    return n


def softmax_f32(logits: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """llama.cpp's ``softmax_impl`` (float expf, float sum in array order) -> (exact p, |error| bound).

    -inf logits give p = 0 exactly; a logit equal to the maximum gives expf(0) = 1 exactly, so
    e.g. two equal logits give p = 0.5 with no error at all. The caller passes the logits in the
    order llama.cpp sums them.
    """
    l = np.asarray(logits, dtype=np.float64)
    finite = np.isfinite(l)
    all_finite = bool(finite.all())
    x = l - l.max() if all_finite else np.where(finite, l - l[finite].max(), 0.0)
    e = np.exp(x) if all_finite else np.where(finite, np.exp(x), 0.0)
    e_exact = (x == 0) if all_finite else (x == 0) | ~finite
    r = np.abs(x)
    r += 2
    r *= U32
    r[e_exact] = 0.0
    de = e * r
    de += F32_MIN_SUBNORMAL
    de[e_exact] = 0.0
    total = e.sum()
    d_total = de.sum() + seq_sum_bound(e, e_exact)[-1]
    p = e / total
    dp = r + d_total / total
    dp += U32
    dp *= p
    dp += F32_MIN_SUBNORMAL
    if d_total == 0:  # every term and sum exact: a p that is a float32 number carries no error
        dp[e_exact & _f32_exact(p)] = 0.0
    if not all_finite:
        dp[~finite] = 0.0
    return p, dp


def cumulative_f32(p: np.ndarray, dp: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A float cumulative sum of (p ± dp) in the given order -> (exact cumsum, |error| bound)."""
    return np.cumsum(p), np.cumsum(dp) + seq_sum_bound(p, dp == 0)


def entropy_f32(p: np.ndarray, dp: np.ndarray) -> tuple[float, float]:
    """H = -sum p·logf(p) over p > 0 in float -> (exact H, |error| bound)."""
    pos = p > 0
    q, dq = p[pos], dp[pos]
    lnq = np.log(q)
    terms = -q * lnq
    # d(-p ln p)/dp = -(ln p + 1); logf adds 2u·|ln p|, the product and the sum one rounding each
    d_terms = dq * np.abs(lnq + 1) + q * 2 * U32 * np.abs(lnq) + U32 * np.abs(terms)
    bound = d_terms.sum() + (seq_sum_bound(terms)[-1] if terms.size else 0.0)
    return float(terms.sum()), float(bound)
