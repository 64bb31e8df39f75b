"""The judge's selecting samplers: dist, mirostat, mirostat v2, adaptive-p.

A selection is judged in two exact halves: the array llama.cpp selected from must be legal (as
for the filters), and the index it selected must be exactly what its own rule gives on its own
array with the oracle's RNG draw (dist: the CDF interval of u, widened by the float expf error
only; the others: libstdc++ ``discrete_distribution`` over llama.cpp's own float p). State llama.cpp
keeps in float (mirostat's mu, adaptive-p's EMA) is tracked as a drift bound across a stream.
"""
from __future__ import annotations

import copy
import math
from dataclasses import dataclass

import numpy as np

from oracle.candidates import TokenDataArray
from properties.numerics import (F32_MIN_SUBNORMAL as TINY, U32 as U, discrete_reachable, discrete_select, seq_sum_bound,
                                 softmax_f32)
from properties.peers.legality import P_FLOOR, FindingDomain, Legal, dense, lookup
from properties.peers.llama_cpp.legal_filters import _ranked, _sorted_view, _vocab
from properties.peers.legality import PeerOutput

_LN2 = math.log(2.0)


@dataclass
class Drift:
    """Bounds on how far llama.cpp's float state has drifted from the oracle's float64 state."""

    mu: float = 0.0
    ema_sum: float | None = None
    ema_weight: float | None = None


def _dist(pre, cur, out, drift) -> Legal:
    v, n = _vocab(cur), cur.size
    if n == 1:
        p_ref, p_tol = np.ones(1), np.zeros(1)
        legal = Legal((1, 1), "same", frozenset({cur.sorted}),
                      p=lookup(dense(cur.ids, p_ref, v), dense(cur.ids, p_tol, v)))
        legal.select = lambda q: None if q.selected == 0 else f"selected {q.selected} of 1"
        legal.notes["selectable"] = cur.ids[:1]
        return legal
    u = copy.deepcopy(pre.rng).uniform_double()
    l = cur.logits
    fin = np.isfinite(l)
    all_finite = bool(fin.all())
    x = l - l.max() if all_finite else np.where(fin, l - l.max(), 0.0)
    e = np.exp(x) if all_finite else np.where(fin, np.exp(x), 0.0)
    rel = np.abs(x)
    rel += 2
    de = e * U * rel + TINY  # float expf(l - max); the sums are double
    if not all_finite:
        de[~fin] = 0.0
    s, ds = e.sum(), de.sum()
    ce = np.cumsum(e)
    cdf = ce / s
    err = (np.cumsum(de) + ce * ds / s) / s + 2.0**-50

    def legal_at(i: np.ndarray) -> np.ndarray:
        """Whether index i's CDF interval [cdf[i-1], cdf[i]) can hold u, within the float error."""
        below = np.where(i > 0, cdf[i - 1] - err[i - 1], -np.inf)
        return (below < u) & (cdf[i] + err[i] >= u)
    p = e / s
    dp = p * (U * rel + ds / s + U) + TINY
    if not all_finite:
        dp[~fin] = 0.0
    legal = Legal((n, n), "same", frozenset({cur.sorted}),
                  p=lookup(dense(cur.ids, p, v), dense(cur.ids, np.maximum(P_FLOOR, dp), v)))

    def select(q: PeerOutput) -> str | None:
        if 0 <= q.selected < n and legal_at(np.array([q.selected]))[0]:
            return None
        return (f"selected index {q.selected}; u={u!r} allows {np.flatnonzero(legal_at(np.arange(n)))[:6].tolist()} "
                f"(oracle {out.selected})")
    legal.select = select
    legal.notes["u"] = u
    legal.notes["selectable"] = cur.ids[legal_at(np.arange(n))]
    return legal


def _discrete_select(pre, legal: Legal, ids: np.ndarray, p: np.ndarray, dp: np.ndarray) -> None:
    """The selection must be exactly discrete_distribution(its own p) with the oracle's next draw.
    ``selectable``: the tokens ``ids`` that draw can give for any p within ``dp`` of the oracle's
    ``p`` (a float32 path on the other side of a CDF boundary picks one of these)."""
    u = copy.deepcopy(pre.rng).uniform_double()

    def select(q: PeerOutput) -> str | None:
        expect = discrete_select(q.p, u)
        return None if q.selected == expect else f"selected {q.selected}, discrete_distribution(p, u={u!r}) gives {expect}"
    legal.select = select
    legal.notes["selectable"] = ids[discrete_reachable(p, dp, u)]


def _kept_select(pre, legal: Legal, out: TokenDataArray) -> None:
    """mirostat's selection over the oracle's kept prefix, renormalised in float."""
    p, dp = softmax_f32(out.logits)
    _discrete_select(pre, legal, out.ids, p, dp)


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
        def overflows_f32(s, mu):
            """llama.cpp's float expression powf(e·powf(2, mu) / (1 - powf(n_vocab, -e)), 1 / s):
            an intermediate past float32's range (2^mu at mu >= 128) makes k inf where the exact
            one is finite."""
            s32, mu32 = np.float32(s), np.float32(mu)
            e = s32 - np.float32(1)
            num = e * np.float32(2) ** mu32
            den = np.float32(1) - np.float32(pre.n_vocab) ** -e
            return not all(np.isfinite(v) for v in (num, den, (num / den) ** (np.float32(1) / s32)))
        variants = [(s, mu) for s in (s_hat - ds, s_hat, s_hat + ds)
                    for mu in (pre.mu - drift.mu, pre.mu, pre.mu + drift.mu)]
        ks = np.array([k_of(s, mu) for s, mu in variants])
        f32_overflow = any(overflows_f32(s, mu) for s, mu in variants)
    if f32_overflow or not np.isfinite(ks).all() or ks.max() >= 2.0**31:
        raise FindingDomain("mirostat-k-overflow")
    # a k that underflows to 0 (near-tied candidates: s near 0, so the 1/s power of a base below 1)
    # is clamped to 1 as llama.cpp clamps it; the slack is taken over the positive ones only
    slack = 8 * U * (1 + np.abs(np.log(ks[ks > 0])).max(initial=0.0))
    k_lo, k_hi = ks.min() * (1 - slack), ks.max() * (1 + slack)
    sizes = (min(max(int(k_lo), 1), n), min(max(int(k_hi), 1), n))
    legal = _ranked(cur, sizes, {True}, order, p=_renormalised(cur))
    _kept_select(pre, legal, out)
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
    # llama.cpp's -log2f(p^) with p^ in [p - dp, p + dp]: the interval's ends, not dp/(p ln 2), since
    # a p^ that may underflow (dp >= p: p below float32's subnormals) has an unbounded surprise,
    # cut at any mu (nightly seed 0: past_fp16 rows drove mu to 165 bits, past 2^-149)
    with np.errstate(divide="ignore", invalid="ignore"):  # p = 0 exactly: expf gave 0, surely cut
        hi = np.where(p > 0, -np.log2(np.maximum(p - dp, 0.0)), np.inf)
        lo = np.where(p > 0, -np.log2(p + dp), np.inf)
    slack = drift.mu + U * abs(pre.mu)  # the peer's mu: the oracle's, within the stream's drift
    widen = lambda s, sign: s * np.where(s * sign >= 0, 1 + 2 * U, 1 - 2 * U)  # log2f's rounding; inf stays inf
    maybe_cut = widen(hi, 1) + slack > pre.mu
    sure_cut = widen(lo, -1) - slack > pre.mu
    first = lambda mask: int(np.argmax(mask)) if mask.any() else n
    sizes = (max(first(maybe_cut), 1), max(first(sure_cut), 1))
    legal = _ranked(cur, sizes, {True}, order, p=_renormalised(cur))
    _kept_select(pre, legal, out)
    _update_mu(pre, out, drift)
    return legal


def _adaptive_p(pre, cur, out, drift) -> Legal:
    v, n = _vocab(cur), cur.size
    p0, dp0 = softmax_f32(cur.logits)
    flags = frozenset({cur.sorted})
    if pre.target < 0:
        legal = Legal((n, n), "same", flags, p=lookup(dense(cur.ids, p0, v), dense(cur.ids, np.maximum(P_FLOOR, dp0), v)))
        _discrete_select(pre, legal, cur.ids, p0, dp0)
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
    if not fin.all():
        z, dz = np.where(fin, z, -np.inf), np.where(fin, dz, 0.0)
    q, dq = softmax_f32(z)
    dq = dq + q * (dz + (q * dz).sum())
    legal = Legal((n, n), "same", flags, logits=lookup(dense(cur.ids, z, v), dense(cur.ids, dz, v)),
                  p=lookup(dense(cur.ids, q, v), dense(cur.ids, np.maximum(P_FLOOR, dq), v)))
    _discrete_select(pre, legal, cur.ids, q, dq)
    sel = out.selected
    drift.ema_sum = dp0[sel] + pre.decay * drift.ema_sum + U * (pre.decay * abs(ws) + 2 * (p0[sel] + pre.decay * abs(ws)))
    drift.ema_weight = pre.decay * drift.ema_weight + U * (pre.decay * tw + 2 * (1 + pre.decay * tw))
    return legal


def _adapted(pre) -> float:
    target = min(max(pre.target, 0.0), 1.0)
    a = target if pre.total_weight == 0 else 2 * target - pre.weighted_sum / pre.total_weight
    return min(max(a, 0.0), 1.0)
