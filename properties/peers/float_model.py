"""First-order error bounds for llama.cpp's float32 arithmetic, so the float64 oracle can say how
far llama.cpp may legitimately land from it.

All bounds are running-error bounds computed from the data (u = 2^-24):

- a sequential float sum s_j = fl(s_{j-1} + t_j) (llama.cpp's loops: softmax's ``cum_sum``,
  top-p/typical cumulative mass, entropies) errs by at most sum_j min(u·|s_j|, |t_j|, |s_{j-1}|):
  one rounding per addition, and a rounded sum is never further from the exact one than either
  operand is (both are representable candidates);
- ``expf(fl(l - max))``: the subtraction's rounding moves the exponent by <= u·|l - max|, expf
  adds <= 1 ulp (2u), so e carries a relative error u·(|l - max| + 2), plus an absolute 2^-149
  once it is subnormal;
- ``logf``/``log2f``/``powf``: <= 1 ulp (2u relative) each.

Second-order terms (products of two u-sized errors) are dropped; every bound below says which
float32 operations it covers.
"""
from __future__ import annotations

import numpy as np

# llama.cpp computes in float: u of float32, and the smallest positive float32 as the absolute
# floor for subnormal results
from properties.numerics import F32_MIN_SUBNORMAL as TINY, U32 as U


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
    step *= U
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
    r *= U
    r[e_exact] = 0.0
    de = e * r
    de += TINY
    de[e_exact] = 0.0
    total = e.sum()
    d_total = de.sum() + seq_sum_bound(e, e_exact)[-1]
    p = e / total
    dp = r + d_total / total
    dp += U
    dp *= p
    dp += TINY
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
    d_terms = dq * np.abs(lnq + 1) + q * 2 * U * np.abs(lnq) + U * np.abs(terms)
    bound = d_terms.sum() + (seq_sum_bound(terms)[-1] if terms.size else 0.0)
    return float(terms.sum()), float(bound)


def window_spread(values: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """max - min of ``values[lo[i]:hi[i]]`` for every i (non-empty windows), via a sparse table:
    O(n log n) however wide the windows are."""
    n = values.size
    levels = [np.asarray(values, dtype=np.float64)]
    maxes, mins = [levels[0]], [levels[0]]
    while (1 << len(maxes)) <= n:
        half = 1 << (len(maxes) - 1)
        maxes.append(np.maximum(maxes[-1][:-half], maxes[-1][half:]))
        mins.append(np.minimum(mins[-1][:-half], mins[-1][half:]))
    k = np.floor(np.log2(hi - lo)).astype(np.int64)
    out = np.empty(lo.size)
    for level in np.unique(k):
        i = np.flatnonzero(k == level)
        a, b = lo[i], hi[i] - (1 << level)
        out[i] = (np.maximum(maxes[level][a], maxes[level][b]) - np.minimum(mins[level][a], mins[level][b]))
    return out


def legal_stops(cum: np.ndarray, d_cum: np.ndarray, threshold: float, strict: bool,
                eligible: np.ndarray) -> tuple[int, int]:
    """Sizes a "keep through the first eligible position whose cumulative mass reaches the
    threshold" rule may produce when the running mass is only known to ±d_cum.

    Returns (smallest, largest) legal size; ``n`` stands for "the stop was never reached".
    """
    n = cum.size
    if strict:
        maybe, surely = cum + d_cum > threshold, cum - d_cum > threshold
    else:
        maybe, surely = cum + d_cum >= threshold, cum - d_cum >= threshold
    first_maybe = np.flatnonzero(maybe & eligible)
    first_surely = np.flatnonzero(surely & eligible)
    lo = int(first_maybe[0]) + 1 if first_maybe.size else n
    hi = int(first_surely[0]) + 1 if first_surely.size else n
    return lo, hi


def discrete_select(weights: np.ndarray, u: float) -> int:
    """libstdc++ ``discrete_distribution<int>`` over the weights with the draw ``u``: weights to
    double, sequential sum, normalise, sequential partial sums with the last forced to 1,
    ``lower_bound``. Fewer than two weights give 0 (and consume no draw)."""
    w = np.asarray(weights).astype(np.float64)
    if w.size < 2:
        return 0
    total = np.cumsum(w)[-1]
    cp = np.cumsum(w / total)
    cp[-1] = 1.0
    return int(np.searchsorted(cp, u, side="left"))


def discrete_reachable(weights: np.ndarray, tol: np.ndarray, u: float) -> np.ndarray:
    """Indexes ``discrete_select`` can give with the draw ``u`` for any weights within ``tol`` of
    ``weights`` (each partial sum of the normalised weights moves by at most its running error)."""
    w, dw = np.asarray(weights, np.float64), np.asarray(tol, np.float64)
    if w.size < 2:
        return np.zeros(min(w.size, 1), dtype=np.int64)
    total = w.sum()
    cp = np.cumsum(w) / total
    err = (np.cumsum(dw) + cp * dw.sum()) / total + 4 * U * cp
    cp[-1], err[-1] = 1.0, 0.0
    below = np.concatenate(([-np.inf], cp[:-1] - err[:-1]))
    return np.flatnonzero((below < u) & (cp + err >= u))
