"""The sampler-specific half of the judge: what llama.cpp may return for one ``apply``.

``legal_for(oracle_sampler, cur_in, drift)`` applies the oracle (advancing its state, exactly as
llama.cpp's sampler advances) and describes every legal llama.cpp answer. The allowances are
the float32 error model of ``float_model`` applied to the arithmetic llama.cpp does in float:

- exact (no allowance): greedy, temp (one correctly rounded division; the oracle's float64
  quotient rounds to the same float, 53 >= 2·24 + 2), logit_bias with distinct tokens, top_k,
  every "untouched" logit or p, every RNG draw, XTC's chance, the selection rule given the array;
- cumulative mass (top_p >=, typical >, XTC's p >= threshold, mirostat-v2's surprise > mu):
  the decision may flip within the running-error bound of the float softmax and float prefix sum;
- thresholds on logits (min_p, top_n_sigma): within the rounding of max + logf(p) and of the
  float mean/std;
- ties: equal keys are interchangeable (llama.cpp's sorts are unstable); typical's float scores
  are interchangeable within their error bound;
- p: within max(1e-6, the float model's bound), per entry;
- state that llama.cpp keeps in float (mirostat's mu, adaptive-p's EMA) drifts by the bound
  ``Drift`` accumulates step by step.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np

from oracle.candidates import TokenDataArray
from oracle.samplers.base import Sampler
from properties.peers.float_model import (TINY, U, cumulative_f32, discrete_select, entropy_f32, legal_stops,
                                          seq_sum_bound, softmax_f32)
from properties.peers.judge import P_FLOOR, FindingDomain, Legal, Unsupported, dense, lookup
from properties.peers.llama_cpp import PeerOutput

_LN2 = math.log(2.0)


@dataclass
class Drift:
    """Bounds on how far llama.cpp's float state has drifted from the oracle's float64 state."""

    mu: float = 0.0
    ema_sum: float | None = None
    ema_weight: float | None = None


# llama.cpp's bucket sort computes int(6.4f·logit + 64): from here on the conversion overflows
# (x86-64: INT_MIN, clamped to the lowest bucket), so such a token sorts as the smallest
BUCKET_OVERFLOW = 3.3e8
_SORTS = {"top-k", "top-p", "min-p", "typical", "xtc", "temp-ext", "mirostat", "mirostat-v2"}


def legal_for(smp: Sampler, cur_in: TokenDataArray, drift: Drift) -> Legal:
    if cur_in.size == 0 or not np.isfinite(cur_in.logits).any():
        raise Unsupported("no finite candidate (llama.cpp's answers there are findings, not semantics)")
    sorts = smp.name in _SORTS and not (smp.name == "top-k" and smp.k <= 128)  # top_k <= 128: std::partial_sort
    if sorts and not cur_in.sorted and cur_in.size > 128 and cur_in.logits.max() >= BUCKET_OVERFLOW:
        raise FindingDomain("bucket-sort-int-overflow")
    pre = copy.deepcopy(smp)
    out = cur_in.copy()
    smp.apply(out)
    build = _identity if smp.name.startswith("?") else _BUILDERS[smp.name]
    legal = build(pre, cur_in, out, drift)
    legal.oracle = out
    return legal


def _vocab(cur: TokenDataArray) -> int:
    return int(cur.ids.max()) + 1


def _identity(pre, cur, out, drift) -> Legal:
    return Legal((cur.size, cur.size), "same", frozenset({cur.sorted}))


def _transform(tol_fn=None, flags=None):
    """Logits change in place (order and size kept); ``tol_fn(pre, cur, out) -> dense tolerance``."""
    def build(pre, cur, out, drift) -> Legal:
        v = _vocab(cur)
        ref = dense(out.ids, out.logits, v)
        tol = tol_fn(pre, cur, out, v) if tol_fn else np.zeros(v)
        return Legal((cur.size, cur.size), "same", frozenset({out.sorted} if flags is None else flags),
                     logits=lookup(ref, tol))
    return build


def _penalty_tol(pre, cur, out, v):
    c = dense(cur.ids, pre.counts_for(cur.ids).astype(float), v, 0.0)
    l = dense(cur.ids, cur.logits, v, 0.0)
    scaled = np.where(l <= 0, l * pre.repeat, l / pre.repeat)
    cf = c * pre.freq
    res = dense(out.ids, out.logits, v, 0.0)
    # fl(l·r or l/r), fl(c·f), fl(+present), fl(subtract): one rounding each
    return np.where(c > 0, U * (np.abs(scaled) + np.abs(cf) + np.abs(cf + pre.present) + 2 * np.abs(res)), 0.0)


def _dry_tol(pre, cur, out, v):
    both = np.isfinite(cur.logits) & np.isfinite(out.logits)
    pen = dense(cur.ids, np.where(both, cur.logits - out.logits, 0.0), v, 0.0)
    res = dense(out.ids, out.logits, v, 0.0)
    return np.where(pen != 0, U * (np.abs(pen) + 2 * np.abs(res)), 0.0)


def _bias_tol(pre, cur, out, v):
    # repeated tokens: llama.cpp adds the biases one at a time, the oracle adds their sum once
    uniq, counts = np.unique(pre.tokens, return_counts=True)
    tol = np.zeros(v)
    rep = uniq[counts > 1]
    if rep.size:
        absb = np.zeros(v)
        np.add.at(absb, pre.tokens, np.abs(pre.values))
        l = dense(cur.ids, cur.logits, v, 0.0)
        tol[rep] = U * counts[counts > 1] * (np.abs(l[rep]) + absb[rep])
    return np.where(np.isfinite(tol), tol, 0.0)


def _greedy(pre, cur, out, drift) -> Legal:
    legal = _identity(pre, cur, out, drift)
    legal.select = lambda q: None if q.selected == out.selected else f"selected {q.selected}, oracle {out.selected}"
    return legal


def _dist(pre, cur, out, drift) -> Legal:
    v, n = _vocab(cur), cur.size
    if n == 1:
        p_ref, p_tol = np.ones(1), np.zeros(1)
        legal = Legal((1, 1), "same", frozenset({cur.sorted}), p=lookup(dense(cur.ids, p_ref, v), dense(cur.ids, p_tol, v)))
        legal.select = lambda q: None if q.selected == 0 else f"selected {q.selected} of 1"
        return legal
    u = copy.deepcopy(pre.rng).uniform_double()
    l = cur.logits
    fin = np.isfinite(l)
    x = np.where(fin, l - l.max(), 0.0)
    e = np.where(fin, np.exp(x), 0.0)
    de = np.where(fin, e * U * (np.abs(x) + 2) + TINY, 0.0)  # float expf(l - max); the sums are double
    s, ds = e.sum(), de.sum()
    cdf = np.cumsum(e) / s
    err = (np.cumsum(de) + np.cumsum(e) * ds / s) / s + 2.0**-50
    below = np.concatenate([[-np.inf], cdf[:-1] - err[:-1]])
    legal_idx = (below < u) & (cdf + err >= u)
    p = e / s
    dp = np.where(fin, p * (U * (np.abs(x) + 2) + ds / s + U) + TINY, 0.0)
    legal = Legal((n, n), "same", frozenset({cur.sorted}),
                  p=lookup(dense(cur.ids, p, v), dense(cur.ids, np.maximum(P_FLOOR, dp), v)))

    def select(q: PeerOutput) -> str | None:
        if 0 <= q.selected < n and legal_idx[q.selected]:
            return None
        return f"selected index {q.selected}; u={u!r} allows {np.flatnonzero(legal_idx)[:6].tolist()} (oracle {out.selected})"
    legal.select = select
    legal.notes["u"] = u
    return legal


def _temp_ext(pre, cur, out, drift) -> Legal:
    if pre.delta <= 0:
        return _transform()(pre, cur, out, drift)
    if cur.size <= 1:
        return _identity(pre, cur, out, drift)
    v, n = _vocab(cur), cur.size
    order = np.argsort(-cur.logits, kind="stable")
    l = cur.logits[order]
    p, dp = softmax_f32(l)
    h, dh = entropy_f32(p, dp)
    max_h = math.log(n)
    dmax_h = U * (2 * max_h + 1)
    nh = h / max_h
    dnh = dh / max_h + nh * (dmax_h / max_h + U)
    lo_t, hi_t = max(0.0, pre.t - pre.delta), pre.t + pre.delta
    pw = nh**pre.exponent if nh > 0 else 0.0
    dpw = (abs(pre.exponent) * pw * dnh / nh if nh > 0 else dnh**pre.exponent) + 2 * U * pw
    dyn = lo_t + (hi_t - lo_t) * pw
    ddyn = (hi_t - lo_t) * dpw + U * (3 * dyn + 2 * (hi_t + lo_t))
    if dyn <= ddyn:
        raise Unsupported(f"dynamic temperature {dyn:.3g} within its float error {ddyn:.3g} of 0 (mask vs divide)")
    lp = l / dyn
    fin = np.isfinite(lp)
    dlp = np.where(fin, np.abs(lp) * (ddyn / dyn + 2 * U), 0.0)
    # the double recompute of p from the float logits: p_i = exp(l'_i - l'_0) / sum
    q = out.p
    dd = np.where(fin, dlp + dlp[0], 0.0)
    dq = np.where(fin, q * (dd + (q * dd).sum() + 2 * U) + TINY, 0.0)
    ids = cur.ids[order]
    key = dense(cur.ids, cur.logits, v, -np.inf)
    return Legal((n, n), "ranked", frozenset({True}), ranking=ids, key=key, key_tol=np.zeros(v),
                 logits=lookup(dense(ids, lp, v), dense(ids, dlp, v)),
                 p=lookup(dense(out.ids, q, v), dense(out.ids, np.maximum(P_FLOOR, dq), v)))


def _sorted_view(cur: TokenDataArray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(order, logits in that order, dense logit key) for a descending sort that keeps ties stable."""
    order = np.arange(cur.size) if cur.sorted else np.argsort(-cur.logits, kind="stable")
    return order, cur.logits[order], dense(cur.ids, cur.logits, _vocab(cur), -np.inf)


def _ranked(cur, sizes, flags, order, p=None) -> Legal:
    v = _vocab(cur)
    return Legal(sizes, "ranked", frozenset(flags), ranking=cur.ids[order],
                 key=dense(cur.ids, cur.logits, v, -np.inf), key_tol=np.zeros(v), p=p)


def _top_k(pre, cur, out, drift) -> Legal:
    k = min(pre.k, cur.size)
    order, _, _ = _sorted_view(cur)
    return _ranked(cur, (k, k), {True}, order)


def _top_p(pre, cur, out, drift) -> Legal:
    v, n = _vocab(cur), cur.size
    p, dp = softmax_f32(cur.logits)  # softmax in the current order, then sort
    order, _, _ = _sorted_view(cur)
    cum, dcum = cumulative_f32(p[order], dp[order])
    sizes = legal_stops(cum, dcum, pre.p, strict=False, eligible=np.arange(1, n + 1) >= pre.min_keep)
    return _ranked(cur, sizes, {True}, order,
                   p=lookup(dense(cur.ids, p, v), dense(cur.ids, np.maximum(P_FLOOR, dp), v)))


def _min_p(pre, cur, out, drift) -> Legal:
    v, n = _vocab(cur), cur.size
    l = cur.logits
    m, lnp = float(l.max()), math.log(pre.p)
    thr = m + lnp
    eps = 2 * U * abs(lnp) + U * (abs(m) + abs(lnp)) + TINY  # logf(p) and fl(max + logf(p))
    need = max(1, pre.min_keep)
    c_hi, c_lo = int((l >= thr + eps).sum()), int((l >= thr - eps).sum())
    flags = set()
    if not cur.sorted and c_lo >= need:
        flags.add(False)
    if cur.sorted or c_hi < need:
        flags.add(True)
    if not flags:
        raise Unsupported("min_p: no legal path")
    legal = _ranked(cur, (min(max(c_hi, need), n), min(max(c_lo, need), n)), flags & {True}, _sorted_view(cur)[0])
    if False in flags:  # the unsorted path: threshold set in input order, at least `need` tokens
        must = dense(cur.ids, l >= thr + eps, v, False).astype(bool)
        may = dense(cur.ids, l >= thr - eps, v, False).astype(bool)
        legal.alt = {False: Legal((max(need, c_hi), c_lo), "input", frozenset({False}), must=must, may=may)}
    return legal


def _typical(pre, cur, out, drift) -> Legal:
    v, n = _vocab(cur), cur.size
    order, l, _ = _sorted_view(cur)
    gap = l - l[0]
    if (gap < -104.0).any():  # expf(gap) rounds to 0 in float: llama.cpp's entropy is 0·(-inf) = NaN
        raise FindingDomain("typical-nan-entropy")
    if (gap < -80.0).any():
        raise Unsupported("typical: a float p may underflow to 0 after normalisation (NaN entropy or not)")
    p, dp = softmax_f32(l)
    h, dh = entropy_f32(p, dp)
    lnp = np.log(p)
    score = np.abs(-lnp - h)
    dscore = dp / p + 2 * U * np.abs(lnp) + dh + U * score
    by_score = np.argsort(score, kind="stable")
    s_sorted, p_sorted = score[by_score], p[by_score]
    cum, dcum = cumulative_f32(p_sorted, dp[by_score])
    # tokens whose rank is uncertain (scores within the tolerance) can move mass across a position
    width = 2 * dscore.max()
    cmass = np.concatenate([[0.0], np.cumsum(p_sorted)])
    lo_i = np.searchsorted(s_sorted, s_sorted - width, side="left")
    hi_i = np.searchsorted(s_sorted, s_sorted + width, side="right")
    swing = cmass[hi_i] - cmass[lo_i]
    pos = np.arange(n)
    eligible = (pre.min_keep == 0) | (pos >= pre.min_keep - 1)
    sizes = legal_stops(cum, dcum + swing, pre.p, strict=True, eligible=eligible)
    ids = cur.ids[order]
    return Legal(sizes, "ranked", frozenset({False}), ranking=ids[by_score], key=dense(ids, score, v),
                 key_tol=dense(ids, dscore, v),
                 p=lookup(dense(ids, p, v), dense(ids, np.maximum(P_FLOOR, dp), v)))


def _xtc(pre, cur, out, drift) -> Legal:
    n = cur.size
    if pre.probability <= 0 or pre.threshold > 0.5 or n < 2:
        return _identity(pre, cur, out, drift)
    chance = copy.deepcopy(pre.rng).uniform_float()
    if chance > pre.probability:
        return _identity(pre, cur, out, drift)
    v = _vocab(cur)
    order, l, _ = _sorted_view(cur)
    p, dp = softmax_f32(l)
    run_maybe = int(np.argmin(p + dp >= pre.threshold)) if not (p + dp >= pre.threshold).all() else n
    run_sure = int(np.argmin(p - dp >= pre.threshold)) if not (p - dp >= pre.threshold).all() else n
    removed = set()
    for run in range(run_sure, run_maybe + 1):
        pos_last = max(run - 1, 0)
        removed.add(pos_last if (n - pos_last >= pre.min_keep and pos_last > 0) else 0)
    ids = cur.ids[order]
    legal = _ranked(cur, (n - max(removed), n - min(removed)), {True}, order,
                    p=lookup(dense(ids, p, v), dense(ids, np.maximum(P_FLOOR, dp), v)))
    legal.order = "suffix"
    return legal


def _top_n_sigma(pre, cur, out, drift) -> Legal:
    if pre.n <= 0 or cur.size <= 1:
        return _identity(pre, cur, out, drift)
    v = _vocab(cur)
    fin = np.isfinite(cur.logits)
    l = cur.logits[fin]
    c = l.size
    mean = l.mean()
    dmean = seq_sum_bound(l)[-1] / c + U * abs(mean)
    dev = l - mean
    acc = (dev * dev).sum()
    if acc >= 0.5 * float(np.finfo(np.float32).max):  # llama.cpp's float accumulator overflows
        raise FindingDomain("top-n-sigma-variance-overflow")
    dacc = seq_sum_bound(dev * dev)[-1] + (2 * U * dev * dev + 2 * np.abs(dev) * (dmean + U * np.abs(dev))).sum()
    std = math.sqrt(acc / c)
    dstd = (dacc / c / (2 * std) if std > 0 else math.sqrt(dacc / c)) + 2 * U * std
    thr = l.max() - pre.n * std
    eps = pre.n * dstd + U * (pre.n * std + 2 * abs(thr)) + TINY
    ref = dense(cur.ids, np.where(cur.logits < thr, -np.inf, cur.logits), v)
    maskable = dense(cur.ids, np.abs(cur.logits - thr) <= eps, v, False).astype(bool)
    ref = np.where(maskable, dense(cur.ids, cur.logits, v), ref)
    return Legal((cur.size, cur.size), "same", frozenset({cur.sorted}),
                 logits=lookup(ref, np.zeros(v)), maskable=maskable)


def _discrete_select(pre, out_size_min: int) -> tuple[float | None, object]:
    u = copy.deepcopy(pre.rng).uniform_double()

    def select(q: PeerOutput) -> str | None:
        expect = discrete_select(q.p, u)
        return None if q.selected == expect else f"selected {q.selected}, discrete_distribution(p, u={u!r}) gives {expect}"
    return u, select


def _renormalised(cur: TokenDataArray):
    """p over whichever prefix the peer kept: float64 softmax of those logits, float model bound."""
    logit = dense(cur.ids, cur.logits, _vocab(cur))

    def model(ids: np.ndarray):
        p, dp = softmax_f32(logit[ids])
        return p, np.maximum(P_FLOOR, dp)
    return model


def _mirostat(pre, cur, out, drift) -> Legal:
    n = cur.size
    order, l, _ = _sorted_view(cur)
    p, dp = softmax_f32(l)
    m = min(pre.m - 1, n - 1)
    i = np.arange(max(m, 0))
    t = np.log((i + 2) / (i + 1))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        b = np.log(p[i] / p[i + 1])
        db = dp[i] / p[i] + dp[i + 1] / p[i + 1] + U * (1 + 2 * np.abs(b))
        a, bb = (t * b).sum(), (t * t).sum()
        da = (t * db + 3 * U * t * np.abs(b)).sum() + U * np.abs(t * b).sum() + seq_sum_bound(t * b)[-1:].sum()
        dbb = 7 * U * bb
        s_hat = a / bb
        ds = abs(s_hat) * (abs(da / a) + dbb / bb + U) if np.isfinite(s_hat) else 0.0

        def k_of(s, mu):
            e = s - 1
            return ((e * np.exp2(mu)) / (1 - np.float64(pre.n_vocab) ** (-e))) ** (1 / s)
        ks = np.array([k_of(s, mu) for s in (s_hat - ds, s_hat, s_hat + ds)
                       for mu in (pre.mu - drift.mu, pre.mu, pre.mu + drift.mu)])
    if not np.isfinite(ks).all() or ks.max() >= 2.0**31:
        raise FindingDomain("mirostat-k-overflow")
    slack = 8 * U * (1 + np.abs(np.log(ks)).max())
    k_lo, k_hi = ks.min() * (1 - slack), ks.max() * (1 + slack)
    sizes = (min(max(int(k_lo), 1), n), min(max(int(k_hi), 1), n))
    legal = _ranked(cur, sizes, {True}, order, p=_renormalised(cur))
    _, legal.select = _discrete_select(pre, sizes[0])
    _update_mu(pre, out, drift)
    return legal


def _update_mu(pre, out: TokenDataArray, drift: Drift) -> None:
    p_sel = float(out.p[out.selected])
    _, dp = softmax_f32(out.logits)
    e = -math.log2(p_sel) - pre.tau
    drift.mu += pre.eta * (dp[out.selected] / (p_sel * _LN2) + 2 * U * abs(math.log2(p_sel))) \
        + U * (abs(pre.eta * e) + 2 * abs(pre.mu) + abs(e))


def _mirostat_v2(pre, cur, out, drift) -> Legal:
    n = cur.size
    order, l, _ = _sorted_view(cur)
    p, dp = softmax_f32(l)
    with np.errstate(divide="ignore", invalid="ignore"):  # p = 0: surprise inf, always cut
        surprise = -np.log2(p)
        err = np.where(p > 0, dp / (p * _LN2) + 2 * U * np.abs(surprise), 0.0) + drift.mu + U * abs(pre.mu)
    maybe_cut, sure_cut = surprise + err > pre.mu, surprise - err > pre.mu
    first = lambda mask: int(np.argmax(mask)) if mask.any() else n
    sizes = (max(first(maybe_cut), 1), max(first(sure_cut), 1))
    legal = _ranked(cur, sizes, {True}, order, p=_renormalised(cur))
    _, legal.select = _discrete_select(pre, sizes[0])
    _update_mu(pre, out, drift)
    return legal


def _adaptive_p(pre, cur, out, drift) -> Legal:
    v, n = _vocab(cur), cur.size
    p0, dp0 = softmax_f32(cur.logits)
    flags = frozenset({cur.sorted})
    if pre.target < 0:
        legal = Legal((n, n), "same", flags, p=lookup(dense(cur.ids, p0, v), dense(cur.ids, np.maximum(P_FLOOR, dp0), v)))
        _, legal.select = _discrete_select(pre, n)
        return legal
    if drift.ema_sum is None:  # float init: target/(1 - decay) and 1/(1 - decay)
        drift.ema_sum, drift.ema_weight = 3 * U * abs(pre.weighted_sum), 3 * U * pre.total_weight
    ws, tw = pre.weighted_sum, pre.total_weight
    target = min(max(pre.target, 0.0), 1.0)
    da = 2 * (drift.ema_sum / tw + abs(ws) * drift.ema_weight / tw**2) + U * (4 * target + 3 * abs(ws / tw))
    d = np.abs(p0 - _adapted(pre)) / 0.3
    dd = (dp0 + da) / 0.3 + 3 * U * d
    z = 5.0 - 10.0 * d * d / (1 + d)
    dz = 10 * (2 * d + d * d) / (1 + d) ** 2 * dd + 5 * U * (5 + np.abs(z))
    fin = np.isfinite(cur.logits)
    z, dz = np.where(fin, z, -np.inf), np.where(fin, dz, 0.0)
    q, dq = softmax_f32(z)
    dq = dq + q * (np.where(fin, dz, 0.0) + (q * np.where(fin, dz, 0.0)).sum())
    legal = Legal((n, n), "same", flags, logits=lookup(dense(cur.ids, z, v), dense(cur.ids, dz, v)),
                  p=lookup(dense(cur.ids, q, v), dense(cur.ids, np.maximum(P_FLOOR, dq), v)))
    _, legal.select = _discrete_select(pre, n)
    sel = out.selected
    drift.ema_sum = dp0[sel] + pre.decay * drift.ema_sum + U * (pre.decay * abs(ws) + 2 * (p0[sel] + pre.decay * abs(ws)))
    drift.ema_weight = pre.decay * drift.ema_weight + U * (pre.decay * tw + 2 * (1 + pre.decay * tw))
    return legal


def _adapted(pre) -> float:
    target = min(max(pre.target, 0.0), 1.0)
    a = target if pre.total_weight == 0 else 2 * target - pre.weighted_sum / pre.total_weight
    return min(max(a, 0.0), 1.0)


_BUILDERS = {
    "greedy": _greedy, "dist": _dist, "temp": _transform(), "temp-ext": _temp_ext, "top-k": _top_k,
    "top-p": _top_p, "min-p": _min_p, "typical": _typical, "xtc": _xtc, "top-n-sigma": _top_n_sigma,
    "penalties": _transform(_penalty_tol), "dry": _transform(_dry_tol), "logit-bias": _transform(_bias_tol),
    "mirostat": _mirostat, "mirostat-v2": _mirostat_v2, "adaptive-p": _adaptive_p,
}
