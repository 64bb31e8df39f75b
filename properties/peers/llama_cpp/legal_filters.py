"""The judge's filters and transforms: what llama.cpp may return for one ``apply`` of greedy,
temp, temp_ext, top_k, top_p, min_p, typical, xtc, top_n_sigma, penalties, dry and logit_bias
(the allowances are listed in ``legal.py``)."""
from __future__ import annotations

import copy
import math

import numpy as np

from oracle.candidates import TokenDataArray
from properties.numerics import (F32_MIN_SUBNORMAL as TINY, U32 as U, cumulative_f32, entropy_f32, legal_stops,
                                 seq_sum_bound, softmax_f32, window_spread)
from properties.peers.legality import P_FLOOR, FindingDomain, Legal, Unsupported, dense, lookup


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
    """Tolerance by token id, non-zero only for the window's tokens (the only ones penalised; a
    window token that is no candidate gets one too, and it is never read)."""
    tol = np.zeros(v)
    if not pre.window:
        return tol
    uniq, cnt = np.unique(np.asarray(pre.window, dtype=np.int64), return_counts=True)
    inside = (uniq >= 0) & (uniq < v)
    t, c = uniq[inside], cnt[inside].astype(float)
    l, res = dense(cur.ids, cur.logits, v, 0.0)[t], dense(out.ids, out.logits, v, 0.0)[t]
    scaled = np.where(l <= 0, l * pre.repeat, l / pre.repeat)
    cf = c * pre.freq
    # fl(l·r or l/r), fl(c·f), fl(+present), fl(subtract): one rounding each
    tol[t] = U * (np.abs(scaled) + np.abs(cf) + np.abs(cf + pre.present) + 2 * np.abs(res))
    return tol


def _dry_tol(pre, cur, out, v):
    both = np.isfinite(cur.logits) & np.isfinite(out.logits)
    with np.errstate(invalid="ignore"):  # -inf - -inf outside ``both``: computed, then discarded
        pen = dense(cur.ids, np.where(both, cur.logits - out.logits, 0.0), v, 0.0)
    res = dense(out.ids, out.logits, v, 0.0)
    return np.where(pen != 0, U * (np.abs(pen) + 2 * np.abs(res)), 0.0)


def _bias_tol(pre, cur, out, v):
    # repeated tokens: llama.cpp adds the biases one at a time, the oracle adds their sum once;
    # a biased token no longer among the candidates (ids >= v after a truncation) has no logit
    here = pre.tokens < v
    tokens, values = pre.tokens[here], pre.values[here]
    uniq, counts = np.unique(tokens, return_counts=True)
    tol = np.zeros(v)
    rep = uniq[counts > 1]
    if rep.size:
        absb = np.zeros(v)
        np.add.at(absb, tokens, np.abs(values))
        l = dense(cur.ids, cur.logits, v, 0.0)
        tol[rep] = U * counts[counts > 1] * (np.abs(l[rep]) + absb[rep])
    return np.where(np.isfinite(tol), tol, 0.0)


def _repeated_bias_searched(pre, cur) -> bool:
    """llama.cpp adds every entry of a token found at its own index (``data[t].id == t``), but
    searches the others with one pass over the array that stops at the token's FIRST entry
    (finding logit-bias-repeated-token-searched): a token listed more than once, with entries
    whose sum differs from the first, still a candidate and not at its own index."""
    if not hasattr(pre, "tokens"):  # no biases: nothing to search
        return False
    tokens, values = np.asarray(pre.tokens), np.asarray(pre.values)
    uniq, first, counts = np.unique(tokens, return_index=True, return_counts=True)
    for t, i0, c in zip(uniq, first, counts):
        if c < 2 or values[tokens == t].sum() == values[i0]:
            continue
        at_own = t < cur.size and cur.ids[t] == t
        if not at_own and (cur.ids == t).any():
            return True
    return False


def _logit_bias(pre, cur, out, drift) -> Legal:
    """llama.cpp's logit_bias keeps the input's ``sorted`` flag, the spec clears it (finding
    logit-bias-stale-sorted). A kept flag is legal while the biased array is still in descending
    order (one candidate, zero biases, biases that move nothing past a neighbour); once the biases
    break the order, later samplers would trust a stale order: the finding's domain."""
    if cur.sorted and out.size > 1 and not (out.logits[:-1] >= out.logits[1:]).all():
        raise FindingDomain("logit-bias-stale-sorted")
    if _repeated_bias_searched(pre, cur):
        raise FindingDomain("logit-bias-repeated-token-searched")
    legal = _transform(_bias_tol)(pre, cur, out, drift)
    legal.sorted_flags = frozenset({out.sorted, cur.sorted})
    return legal


def _greedy(pre, cur, out, drift) -> Legal:
    legal = _identity(pre, cur, out, drift)
    legal.select = lambda q: None if q.selected == out.selected else f"selected {q.selected}, oracle {out.selected}"
    return legal


def _temp_ext(pre, cur, out, drift) -> Legal:
    if pre.delta <= 0:
        return _transform()(pre, cur, out, drift)
    if cur.size <= 1:
        return _identity(pre, cur, out, drift)
    v, n = _vocab(cur), cur.size
    order = cur.descending()
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
    order = np.arange(cur.size) if cur.sorted else cur.descending()  # sorted once, shared with the oracle
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
    # logf(p) (<= 1 ulp) and fl(max + logf(p)); p = 1 gives logf(1) = 0 and max + 0: exact
    eps = 2 * U * abs(lnp) + U * abs(m + lnp) + TINY if lnp != 0 else 0.0
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
    # a token whose rank is uncertain (score within the tolerance of the one at position k) may
    # swap with it: cum_k moves by their p difference (nothing for equal p)
    width = 2 * dscore.max()
    lo_i = np.searchsorted(s_sorted, s_sorted - width, side="left")
    hi_i = np.searchsorted(s_sorted, s_sorted + width, side="right")
    swing = (hi_i - lo_i - 1) * window_spread(p_sorted, lo_i, hi_i)
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
