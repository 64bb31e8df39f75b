"""Truncation filters: top_k, top_p, min_p, typical, top_n_sigma, xtc.

Each returns a new float32 ``[B, V]`` array in which surviving logits are bit-identical and
dropped tokens are -inf. "Order" means descending logit with ties broken by lower token id
(see ``gpu_impl._order``); rows whose parameters make the filter a no-op are copied exactly.
"""
from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from gpu_impl._array import (NEG_INF, above_zero, as_logits, drop, nonneg, on_device, on_host, on_rows, param_xp,
                             quiet, row_param, unit_param, widen_exact)
from gpu_impl._deferred import validated
from gpu_impl._graphs import replayed, upload
from gpu_impl._order import (finite_counts, first_reach, keep_first_n, keep_ranked, last_true, nth_largest,
                             sorted_top)
from gpu_impl.softmax import entropy_from_logits, exp_shifted, row_softmax

_WINDOW = 1024  # top_p: candidates sorted in the first round; flat rows fall back to a full sort


@replayed()
@validated
def top_k(logits: Any, k: Any) -> Any:
    """Keep exactly ``min(k, V)`` tokens, the largest logits; among tokens equal to the k-th
    largest value the lowest ids are kept. ``k <= 0`` is a no-op."""
    xp, x, _ = as_logits(logits)
    B, V = x.shape
    k = row_param(k, B, "k", param_xp(xp, k), integer=True)
    if on_device(xp, x):
        from gpu_impl import kernels
        return kernels.top_k_rows(xp.ascontiguousarray(x), upload(xp, k))
    active, k = (k > 0) & (k < V), xp.asarray(k)  # decided on the host when k was given there

    def fn(sub: Any, sel: Any) -> Any:
        kk = k[sel]
        c = nth_largest(xp, sub, kk, finite_counts(xp, sub))
        return drop(xp, sub, ~keep_first_n(xp, sub, c, kk))
    return on_rows(xp, x, active, fn)


def _top_p_cut(xp: ModuleType, x: Any, row_max: Any, p: Any, min_keep: Any) -> tuple[Any, Any]:
    """``(n, c)``: keep the first ``n`` tokens, ``c`` being the value at position ``n - 1``
    (``c = -inf`` keeps every candidate)."""
    B, V = x.shape
    nf = finite_counts(xp, x)
    width = min(V, max(_WINDOW, int(min_keep.max())))
    m = xp.where(row_max == NEG_INF, xp.float32(0), row_max)[:, None]
    # when every candidate fits in the window (e.g. after top_k) the normaliser comes from the
    # window; otherwise it needs one exp pass over the full rows
    s = exp_shifted(xp, x, row_max)[1] if int(nf.max()) > width else None
    n_out = xp.full(B, V, dtype=xp.int64)
    c_out = xp.full(B, NEG_INF, dtype=xp.float32)
    todo = xp.arange(B)
    sub = x
    while True:
        vals = sorted_top(xp, sub, width, nf[todo])
        with quiet():
            e = xp.exp(vals - m[todo])
            probs = e / (e.sum(axis=1) if s is None else s[todo])[:, None]
        cum = xp.cumsum(probs, axis=1)  # float32, as llama.cpp accumulates
        first = first_reach(xp, cum, p[todo])
        reached = first < width
        # a window holding every candidate that never reaches p means "keep all" (rounding)
        done = reached | (nf[todo] <= width) | (width == V)
        n = xp.minimum(xp.maximum(first + 1, min_keep[todo]), V)
        c = xp.take_along_axis(vals, (xp.minimum(n, width) - 1)[:, None], axis=1)[:, 0]
        fin = todo[done]
        n_out[fin] = xp.where(reached, n, V)[done]
        c_out[fin] = xp.where(reached, c, NEG_INF)[done]
        todo = todo[~done]
        if todo.size == 0:
            return n_out, c_out
        width, sub = V, x[todo]


@replayed()
@validated
def top_p(logits: Any, p: Any, min_keep: Any = 0) -> Any:
    """Nucleus: in order, the shortest prefix whose cumulative probability is ``>= p`` (the
    crossing token is kept) and whose length is ``>= min_keep``. ``p >= 1`` is a no-op; if the
    float32 cumulative sum never reaches ``p``, every candidate is kept."""
    xp, x, row_max = as_logits(logits)
    B = x.shape[0]
    p = row_param(p, B, "p", param_xp(xp, p))
    mk = nonneg(xp, row_param(min_keep, B, "min_keep", param_xp(xp, min_keep), integer=True), "min_keep")
    if on_device(xp, x):
        from gpu_impl import kernels
        return kernels.top_p_rows(xp.ascontiguousarray(x), row_max, upload(xp, p), upload(xp, mk))
    active, p, mk = p < 1, xp.asarray(p), xp.asarray(mk)

    def fn(sub: Any, sel: Any) -> Any:
        n, c = _top_p_cut(xp, sub, row_max[sel], p[sel], mk[sel])
        return drop(xp, sub, ~keep_first_n(xp, sub, c, n))
    return on_rows(xp, x, active, fn)


@replayed()
@validated
def min_p(logits: Any, p: Any, min_keep: Any = 0) -> Any:
    """Keep ``l >= max + ln p`` (float32, ``>=``). If fewer than ``max(min_keep, 1)`` survive,
    keep instead the first ``max(min_keep, 1)`` in order. ``p <= 0`` is a no-op."""
    xp, x, row_max = as_logits(logits)
    B, V = x.shape
    p = row_param(p, B, "p", param_xp(xp, p))
    mk = nonneg(xp, row_param(min_keep, B, "min_keep", param_xp(xp, min_keep), integer=True), "min_keep")
    if on_device(xp, x):
        from gpu_impl import kernels
        # p <= 1 keeps the row max (max + ln p <= max): with min_keep <= 1 no row can be short
        short = not (on_host(p) and on_host(mk)) or bool((above_zero(np, p) & ((p > 1) | (mk > 1))).any())
        return kernels.min_p_rows(xp.ascontiguousarray(x), row_max, upload(xp, p), upload(xp, mk), short)
    active = above_zero(np if on_host(p) else xp, p)
    p, mk = xp.asarray(p), xp.asarray(mk)

    def fn(sub: Any, sel: Any) -> Any:
        with quiet():
            thr = row_max[sel] + xp.log(p[sel])
        keep = sub >= thr[:, None]
        need = xp.minimum(xp.maximum(mk[sel], 1), V)
        short = keep.sum(axis=1) < need
        if bool(short.any()):  # llama.cpp's sorted fallback
            i = xp.nonzero(short)[0]
            rows, n = sub[i], need[i]
            keep[i] = keep_first_n(xp, rows, nth_largest(xp, rows, n), n)
        return drop(xp, sub, ~keep)
    return on_rows(xp, x, active, fn)


def _typical_key(xp: ModuleType, score: Any, logit: Any) -> Any:
    """uint64 sort key: ascending score, then descending logit (bit patterns, exact).

    Equal keys mean equal logits, whose order (lower id first) is settled by ``keep_ranked``.
    """
    s_bits = xp.ascontiguousarray(score).view(xp.uint32)  # score >= 0: bits order like values
    l_bits = xp.ascontiguousarray(logit + xp.float32(0)).view(xp.uint32)  # -0.0 -> +0.0
    neg = (l_bits >> xp.uint32(31)) == 1
    ascending = xp.where(neg, ~l_bits, l_bits | xp.uint32(0x80000000))
    return (s_bits.astype(xp.uint64) << xp.uint64(32)) | (~ascending).astype(xp.uint64)


def _key_logit(xp: ModuleType, key: Any) -> Any:
    """Inverse of the logit half of ``_typical_key``."""
    ascending = ~(key & xp.uint64(0xFFFFFFFF)).astype(xp.uint32)
    pos = (ascending >> xp.uint32(31)) == 1
    return xp.where(pos, ascending & xp.uint32(0x7FFFFFFF), ~ascending).view(xp.float32)


def _typical_keep(xp: ModuleType, x: Any, row_max: Any, p: Any, min_keep: Any) -> Any:
    B, V = x.shape
    h, s, log_s = entropy_from_logits(xp, x, row_max)
    with quiet():  # -ln p_i from the logits (exact gap + ln s); -inf tokens get inf, come last
        score = xp.abs((row_max[:, None] - x) + (log_s - h)[:, None])
    score = xp.where(x > NEG_INF, score, xp.float32(np.inf))  # all -inf row: inf, not NaN
    key = _typical_key(xp, score, x)
    # sort the keys alone (no argsort): the logit, hence p, is recovered from each sorted key
    ordered = xp.sort(key, axis=1)
    with quiet():
        probs = xp.exp(_key_logit(xp, ordered) - row_max[:, None]) / s[:, None]
    cum = xp.cumsum(probs, axis=1)  # float32, as llama.cpp accumulates
    first = first_reach(xp, cum, p, strict=True)
    n = xp.where(first < V, xp.minimum(xp.maximum(first + 1, xp.maximum(min_keep, 1)), V), V)
    kc = xp.take_along_axis(ordered, (n - 1)[:, None], axis=1)
    return keep_ranked(xp, key < kc, key == kc, n)


@validated
def typical(logits: Any, p: Any, min_keep: Any = 0) -> Any:
    """Locally typical: candidates ordered by ascending ``|-ln p_i - H|`` (ties: descending
    logit, then lower id); keep the shortest prefix whose cumulative probability is ``> p``
    (strict) and whose length is ``>= max(min_keep, 1)``; if never, keep all. ``p >= 1``: no-op."""
    xp, x, row_max = as_logits(logits)
    B = x.shape[0]
    p = row_param(p, B, "p", param_xp(xp, p))
    mk = nonneg(xp, row_param(min_keep, B, "min_keep", param_xp(xp, min_keep), integer=True), "min_keep")
    active, p, mk = p < 1, xp.asarray(p), xp.asarray(mk)

    def fn(sub: Any, sel: Any) -> Any:
        return drop(xp, sub, ~_typical_keep(xp, sub, row_max[sel], p[sel], mk[sel]))
    return on_rows(xp, x, active, fn)


@validated
def top_n_sigma(logits: Any, n: Any) -> Any:
    """Over the finite logits: drop ``l < max - n * std`` (population std). ``n <= 0`` or
    ``V < 2``: no-op."""
    xp, x, row_max = as_logits(logits)
    B, V = x.shape
    n = row_param(n, B, "n", param_xp(xp, n))
    active = above_zero(np if on_host(n) else xp, n) & (V >= 2)
    n = xp.asarray(n)

    def fn(sub: Any, sel: Any) -> Any:
        fin = xp.isfinite(sub)
        cnt = fin.sum(axis=1)
        z = xp.where(fin, sub, xp.float32(0))
        # scale into [-1, 1] first: (l - mean)^2 overflows float32 once |l| passes ~1e19
        scale = xp.abs(z).max(axis=1)
        scale = xp.where(scale > 0, scale, xp.float32(1))[:, None]
        with quiet():  # cnt == 0 rows: NaN threshold, nothing dropped
            y = z / scale
            mean = y.sum(axis=1) / cnt
            d = xp.where(fin, y - mean[:, None].astype(xp.float32), xp.float32(0))
            std = xp.sqrt((d * d).sum(axis=1) / cnt).astype(xp.float32) * scale[:, 0]
            thr = row_max[sel] - n[sel] * std
        return drop(xp, sub, sub < thr[:, None])
    return on_rows(xp, x, active, fn)


@validated
def xtc(logits: Any, chance: Any, probability: Any, threshold: Any, min_keep: Any = 0) -> Any:
    """Exclude top choices. A row is untouched if ``probability <= 0``, ``threshold > 0.5``, it
    has fewer than 2 finite candidates, or ``chance > probability``. Otherwise, with m tokens of
    probability ``>= threshold``: if ``m >= 2`` and ``n - (m - 1) >= min_keep``, drop all of them
    but the least probable (among equal logits the highest id counts as least probable)."""
    xp, x, row_max = as_logits(logits)
    B, V = x.shape
    chance = unit_param(chance, B, "chance", param_xp(xp, chance), dtype=np.float32)
    prob = row_param(probability, B, "probability", param_xp(xp, probability))
    thr = row_param(threshold, B, "threshold", param_xp(xp, threshold))
    mk = nonneg(xp, row_param(min_keep, B, "min_keep", param_xp(xp, min_keep), integer=True), "min_keep")
    params = (chance, prob, thr)
    if all(on_host(a) for a in params):  # the parameters' part of the decision, read nowhere
        on = above_zero(np, prob) & (thr <= 0.5) & (chance <= prob)
        if not bool(on.any()):
            return x.copy()
    chance, prob, thr, mk = (xp.asarray(a) for a in (*params, mk))
    if not all(on_host(a) for a in params):
        on = above_zero(xp, prob) & (thr <= 0.5) & (chance <= prob)
    nf = finite_counts(xp, x)

    def fn(sub: Any, sel: Any) -> Any:
        # -inf tokens are not candidates, even when threshold == 0 makes p = 0 "above"
        # compared widened: CuPy's float32 comparison flushes subnormals, so a subnormal threshold
        # read as 0 made every token "above" (H100 run: a 'huge' row kept 1 of 32,000 tokens)
        p = widen_exact(xp, row_softmax(xp, sub, row_max[sel]))
        above = (p >= widen_exact(xp, thr[sel])[:, None]) & (sub > NEG_INF)
        m = above.sum(axis=1)
        apply = (m >= 2) & (nf[sel] - (m - 1) >= mk[sel])
        # the above-threshold set is the top m by logit; its least probable member is the
        # highest id holding the smallest logit in the set
        c = xp.where(above, sub, xp.float32(np.inf)).min(axis=1)
        spare = xp.arange(V)[None, :] == last_true(xp, sub == c[:, None])[:, None]
        return drop(xp, sub, above & ~spare & apply[:, None])
    return on_rows(xp, x, xp.asarray(on) & (nf >= 2), fn)  # the row counts are data: read on the device
