"""transformers' warpers on fixed-shape [B, V] float32 rows (-inf = removed), per-row parameters.

Semantics as ``generation/logits_process.py`` (see ``oracle.engines.transformers`` for the
spec written independently): top_k keeps every tie with the k-th value; top_p drops the
ascending prefix whose cumulative softmax is <= 1 - p (lower ids first among equal values);
min_p keeps p >= min_p·p_max; typical, epsilon and eta as the code computes them.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from gpu_impl._array import (NEG_INF, above_zero, as_logits, divide_rows, drop, nonneg, on_rows, param_xp, quiet,
                             row_param, scaled_rows, widen_exact)
from gpu_impl._order import first_reach, nth_largest
from gpu_impl.engines._common import first_n_ascending, history_counts
from gpu_impl.softmax import entropy_from_logits, exp_shifted, row_softmax


def _min_keep(xp, value, B) -> Any:
    mk = row_param(value, B, "min_keep", xp, integer=True)
    if bool((mk < 1).any()):
        raise ValueError(f"parameter min_keep must be >= 1 (transformers' min_tokens_to_keep), got {mk.tolist()}")
    return mk


def hf_temperature(logits: Any, t: Any) -> Any:
    """``l / t``; any t <= 0 raises (transformers has no sampling at t <= 0)."""
    xp, x, _ = as_logits(logits)
    tx = param_xp(xp, t)
    t = row_param(t, x.shape[0], "t", tx)
    if not bool(above_zero(tx, t).all()):  # exact for a subnormal t on CuPy too (``above_zero``)
        raise ValueError(f"temperature must be > 0 in transformers (greedy is do_sample=False), got {t.tolist()}")
    with quiet():  # a small t overflows to ±inf, as in torch
        return divide_rows(xp, x, t)


def hf_top_k(logits: Any, k: Any, min_keep: Any = 1) -> Any:
    """Drop l < the max(k, min_keep)-th largest logit (ties kept); k <= 0 raises."""
    xp, x, _ = as_logits(logits)
    B, V = x.shape
    k = row_param(k, B, "k", xp, integer=True)
    if bool((k <= 0).any()):
        raise ValueError(f"parameter k must be > 0 (transformers' top_k), got {k.tolist()}")
    kk = xp.minimum(xp.maximum(k, _min_keep(xp, min_keep, B)), V)

    def fn(sub, sel):
        return drop(xp, sub, sub < nth_largest(xp, sub, kk[sel])[:, None])
    return on_rows(xp, x, kk < V, fn)


def _top_p_rows(xp, x: Any, row_max: Any, p: Any, mk: Any) -> Any:
    V = x.shape[1]
    srt = xp.sort(x, axis=1)
    _, s = exp_shifted(xp, x, row_max)
    with quiet():
        probs = xp.exp(srt - row_max[:, None]) / s[:, None]
    cum = xp.cumsum(probs, axis=1)  # float32, as torch
    n = xp.minimum(first_reach(xp, cum, (1.0 - p).astype(xp.float32), strict=True), xp.maximum(V - mk, 0))
    return drop(xp, x, first_n_ascending(xp, x, srt, n))


def hf_top_p(logits: Any, p: Any, min_keep: Any = 1) -> Any:
    xp, x, row_max = as_logits(logits)
    B = x.shape[0]
    p = row_param(p, B, "p", xp, dtype=xp.float64)
    if bool(((p < 0) | (p > 1)).any()):
        raise ValueError(f"parameter p must lie in [0, 1] (transformers' top_p), got {p.tolist()}")
    mk = _min_keep(xp, min_keep, B)
    return on_rows(xp, x, p < 1, lambda sub, sel: _top_p_rows(xp, sub, row_max[sel], p[sel], mk[sel]))


def hf_min_p(logits: Any, p: Any, min_keep: Any = 1) -> Any:
    """Drop probs < p·p_max (equality kept); the min_keep largest always stay."""
    xp, x, row_max = as_logits(logits)
    B, V = x.shape
    px = param_xp(xp, p)
    p = row_param(p, B, "p", px)
    wide = widen_exact(px, p)  # decided in float64: CuPy's kernels flush a float32 subnormal to 0
    if bool(((wide < 0) | (wide > 1)).any()):
        raise ValueError(f"parameter p must lie in [0, 1] (transformers' min_p), got {p.tolist()}")
    mk = xp.minimum(_min_keep(xp, min_keep, B), V)
    probs = row_softmax(xp, x, row_max)
    remove = probs < scaled_rows(xp, p, probs.max(axis=1))
    top = first_n_ascending(xp, -x, xp.sort(-x, axis=1), mk)  # descending, lower ids first
    return drop(xp, x, remove & ~top)


def hf_typical(logits: Any, mass: Any, min_keep: Any = 1) -> Any:
    xp, x, row_max = as_logits(logits)
    B, V = x.shape
    mass = row_param(mass, B, "mass", xp, dtype=np.float64)  # float64: see ``_in_open_unit``
    if not _in_open_unit(mass):
        raise ValueError(f"parameter mass must lie in (0, 1) (transformers' typical_p), got {mass.tolist()}")
    mk = _min_keep(xp, min_keep, B)
    h, s, log_s = entropy_from_logits(xp, x, row_max)
    with quiet():
        shifted = xp.abs((row_max[:, None] - x) + (log_s - h)[:, None])  # |-log p - H|
    shifted = xp.where(x > NEG_INF, shifted, xp.float32(xp.inf))
    order = xp.argsort(shifted, axis=1, kind="stable")
    with quiet():
        probs = xp.exp(xp.take_along_axis(x, order, axis=1) - row_max[:, None]) / s[:, None]
    cum = xp.cumsum(probs, axis=1)
    last = xp.minimum(first_reach(xp, cum, mass), V - 1)
    srt = xp.take_along_axis(shifted, order, axis=1)
    remove_sorted = srt > xp.take_along_axis(srt, last[:, None], axis=1)
    remove_sorted &= xp.arange(V)[None, :] >= mk[:, None]
    remove = xp.empty_like(remove_sorted)
    remove[xp.arange(B)[:, None], order] = remove_sorted  # back to vocab order
    return drop(xp, x, remove)


def _in_open_unit(v: Any) -> bool:
    """Whether every value lies in (0, 1), decided in float64: CuPy's kernels flush float32
    subnormals (-ftz=true), so a float32 eps of 1e-45 compares as 0 there and a valid parameter
    would be refused on the device only."""
    return bool(((v > 0) & (v < 1)).all())


def _cut_unless_top(xp, x, row_max, cut, mk) -> Any:
    """Drop probabilities below ``cut`` (float64 [batch]: a float32 subnormal cut compares as 0
    in CuPy's kernels) but the ``mk`` largest logits."""
    probs = row_softmax(xp, x, row_max)
    kth = nth_largest(xp, x, xp.minimum(mk, x.shape[1]))
    return drop(xp, x, (probs < cut[:, None]) & (x < kth[:, None]))


def hf_epsilon(logits: Any, eps: Any, min_keep: Any = 1) -> Any:
    xp, x, row_max = as_logits(logits)
    B = x.shape[0]
    eps = row_param(eps, B, "eps", xp, dtype=np.float64)  # float64: see ``_in_open_unit``
    if not _in_open_unit(eps):
        raise ValueError(f"parameter eps must lie in (0, 1) (transformers' epsilon_cutoff), got {eps.tolist()}")
    return _cut_unless_top(xp, x, row_max, eps, _min_keep(xp, min_keep, B))


def hf_eta(logits: Any, eps: Any, min_keep: Any = 1) -> Any:
    """eta = min(eps, sqrt(eps)·exp(-H)) (the code; its docstring says sqrt(eps·exp(-H)))."""
    xp, x, row_max = as_logits(logits)
    B = x.shape[0]
    eps = row_param(eps, B, "eps", xp, dtype=np.float64)  # float64: see ``_in_open_unit``
    if not _in_open_unit(eps):
        raise ValueError(f"parameter eps must lie in (0, 1) (transformers' eta_cutoff), got {eps.tolist()}")
    h, _, _ = entropy_from_logits(xp, x, row_max)
    # float64 (transformers' is float32): sqrt(eps) of a subnormal eps is 0 in CuPy's float32 kernels
    cut = xp.minimum(eps, xp.sqrt(eps) * xp.exp(-widen_exact(xp, h)))
    return _cut_unless_top(xp, x, row_max, cut, _min_keep(xp, min_keep, B))


def hf_repetition_penalty(logits: Any, history: Any, penalty: Any) -> Any:
    """Every id in ``history`` (prompt + output, -1 padding, no window), once: l < 0 ? l·r : l/r."""
    xp, x, _ = as_logits(logits)
    B, V = x.shape
    rx = param_xp(xp, penalty)
    r = row_param(penalty, B, "penalty", rx)
    if not bool(above_zero(rx, r).all()):  # exact for a subnormal penalty on CuPy too
        raise ValueError(f"parameter penalty must be > 0, got {r.tolist()}")
    seen = history_counts(xp, history, B, V) > 0
    with quiet():  # a small r overflows l / r to inf, as in torch
        return xp.where(seen, xp.where(x < 0, x * xp.asarray(r)[:, None], divide_rows(xp, x, r)), x)


def hf_chain(logits: Any, history: Any, repetition_penalty: Any, t: Any, top_k: Any, top_p: Any, min_p: Any,
             typical: Any = 1.0, epsilon: Any = 0.0, eta: Any = 0.0, min_keep: Any = 1) -> Any:
    """generate(do_sample=True): repetition -> temperature -> top_k -> top_p -> min_p -> typical
    -> epsilon -> eta. Neutral values (1, k <= 0, 1, 0, 1, 0, 0) leave a row's stage out."""
    xp, x, _ = as_logits(logits)
    B = x.shape[0]
    prm = {n: row_param(v, B, n, xp, dtype=xp.float64) for n, v in
           dict(rep=repetition_penalty, t=t, p=top_p, m=min_p, typ=typical, eps=epsilon, eta=eta).items()}
    k = row_param(top_k, B, "top_k", xp, integer=True)
    mk = nonneg(xp, row_param(min_keep, B, "min_keep", xp, integer=True), "min_keep")
    stages = [
        (prm["rep"] != 1, lambda s, i: hf_repetition_penalty(s, _rows(xp, history, B, i), prm["rep"][i])),
        (prm["t"] != 1, lambda s, i: hf_temperature(s, prm["t"][i])),
        (k > 0, lambda s, i: hf_top_k(s, k[i], mk[i])),
        (prm["p"] < 1, lambda s, i: hf_top_p(s, prm["p"][i], mk[i])),
        (prm["m"] > 0, lambda s, i: hf_min_p(s, prm["m"][i], mk[i])),
        (prm["typ"] < 1, lambda s, i: hf_typical(s, prm["typ"][i], mk[i])),
        (prm["eps"] > 0, lambda s, i: hf_epsilon(s, prm["eps"][i], mk[i])),
        (prm["eta"] > 0, lambda s, i: hf_eta(s, prm["eta"][i], mk[i])),
    ]
    for active, fn in stages:
        x = on_rows(xp, x, active, lambda sub, sel, fn=fn: fn(sub, _index(xp, sel, B)))
    return x


def _index(xp, sel, B):
    return xp.arange(B) if isinstance(sel, slice) else sel


def _rows(xp, history, B, idx):
    h = xp.asarray(history)
    return h if h.ndim == 1 else h[idx]
