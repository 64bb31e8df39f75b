"""The buggy truncation filters of the sampler zoo: each is one gpu_impl function re-implemented
with one known engine bug (the comment ``# the bug`` marks it). They use gpu_impl's own plumbing
(validation, per-row parameters, order statistics), so everything but the bug matches.

A factory takes the base module (gpu_impl, or another module with its API) and returns the
replacement; wrappers call the base module's public function and so mutate any implementation.
"""
from __future__ import annotations

from types import ModuleType
from typing import Any, Callable

import numpy as np

from gpu_impl._array import NEG_INF, as_logits, drop, get_xp, nonneg, on_rows, quiet, row_param, unit_param
from gpu_impl._order import finite_counts, keep_first_n, nth_largest, sorted_top
from gpu_impl.softmax import row_softmax

Factory = Callable[[ModuleType], Callable[..., Any]]


# --- top_p ------------------------------------------------------------------------------------

def _prefix_filter(weights: Callable[[Any, Any, Any], Any], keep_count: Callable[[Any, Any, Any], Any]) -> Factory:
    """A top_p re-implementation on the fully sorted row: ``weights(xp, sorted, row_max)`` are
    accumulated in order and ``keep_count(xp, cum, p)`` says how many tokens to keep."""
    def factory(base: ModuleType) -> Callable[..., Any]:
        def top_p(logits: Any, p: Any, min_keep: Any = 0) -> Any:
            xp, x, row_max = as_logits(logits)
            B, V = x.shape
            p = row_param(p, B, "p", xp)
            mk = nonneg(xp, row_param(min_keep, B, "min_keep", xp, integer=True), "min_keep")

            def fn(sub: Any, sel: Any) -> Any:
                vals = sorted_top(xp, sub, V)
                with quiet():
                    cum = xp.cumsum(weights(xp, vals, row_max[sel]), axis=1)
                n = xp.minimum(xp.maximum(keep_count(xp, cum, p[sel][:, None]), mk[sel]), V)
                c = xp.take_along_axis(vals, (n - 1)[:, None], axis=1)[:, 0]
                return drop(xp, sub, ~keep_first_n(xp, sub, c, n))
            return on_rows(xp, x, p < 1, fn)
        return top_p
    return factory


def _probs(xp: Any, vals: Any, row_max: Any) -> Any:
    e = xp.exp(vals - row_max[:, None])
    return e / e.sum(axis=1, keepdims=True)


top_p_on_logits = _prefix_filter(
    lambda xp, vals, m: xp.where(xp.isfinite(vals), vals, xp.float32(0)),  # the bug: raw logits, no softmax
    lambda xp, cum, p: (cum < p).sum(axis=1) + 1)
top_p_strict = _prefix_filter(
    _probs,
    lambda xp, cum, p: (cum <= p).sum(axis=1) + 1)  # the bug: first cum > p; llama.cpp stops at cum >= p
top_p_mass_le_p = _prefix_filter(
    _probs,
    lambda xp, cum, p: xp.maximum((cum <= p).sum(axis=1), 1))  # the bug: stops before the crossing token


def top_p_ignores_min_keep(base: ModuleType) -> Callable[..., Any]:
    return lambda logits, p, min_keep=0: base.top_p(logits, p, 0)  # the bug: min_keep never forwarded


# --- top_k ------------------------------------------------------------------------------------

def top_k_keeps_ties(base: ModuleType) -> Callable[..., Any]:
    def top_k(logits: Any, k: Any) -> Any:
        xp, x, _ = as_logits(logits)
        B, V = x.shape
        k = row_param(k, B, "k", xp, integer=True)

        def fn(sub: Any, sel: Any) -> Any:
            c = nth_largest(xp, sub, k[sel], finite_counts(xp, sub))
            return drop(xp, sub, sub < c[:, None])  # the bug: every token equal to the k-th survives
        return on_rows(xp, x, (k > 0) & (k < V), fn)
    return top_k


def top_k_reads_past_end(base: ModuleType) -> Callable[..., Any]:
    def top_k(logits: Any, k: Any) -> Any:
        xp, x, _ = as_logits(logits)
        B, V = x.shape
        k = row_param(k, B, "k", xp, integer=True)
        past = k > V
        if not bool(past.any()):
            return base.top_k(logits, k)
        # the bug: no clamp to V; the k-th value is read past the end of the sorted row, where the
        # (zero-initialised) scratch buffer holds 0.0, so every negative logit is dropped
        out = base.top_k(logits, xp.where(past, 0, k))
        return xp.where(past[:, None] & (x < 0), NEG_INF, out)
    return top_k


def top_k_compacts(base: ModuleType) -> Callable[..., Any]:
    def top_k(logits: Any, k: Any) -> Any:
        xp, x, _ = as_logits(logits)
        B, V = x.shape
        k = row_param(k, B, "k", xp, integer=True)
        # the bug: survivors written to the front of the row in descending order (a sort-based
        # kernel's output layout), so downstream greedy returns position 0, not the token id
        ranked = sorted_top(xp, x, V)
        n = xp.where((k > 0) & (k < V), k, V)
        return xp.where(xp.arange(V)[None, :] < n[:, None], ranked, NEG_INF)
    return top_k


# --- min_p, typical, top_n_sigma, xtc --------------------------------------------------------

def min_p_strict(base: ModuleType) -> Callable[..., Any]:
    def min_p(logits: Any, p: Any, min_keep: Any = 0) -> Any:
        xp, x, row_max = as_logits(logits)
        B, V = x.shape
        p = row_param(p, B, "p", xp)
        mk = nonneg(xp, row_param(min_keep, B, "min_keep", xp, integer=True), "min_keep")

        def fn(sub: Any, sel: Any) -> Any:
            with quiet():
                thr = row_max[sel] + xp.log(p[sel])
            keep = sub > thr[:, None]  # the bug: strict >, a token exactly at the threshold is dropped
            need = xp.minimum(xp.maximum(mk[sel], 1), V)
            short = keep.sum(axis=1) < need
            if bool(short.any()):
                i = xp.nonzero(short)[0]
                keep[i] = keep_first_n(xp, sub[i], nth_largest(xp, sub[i], need[i]), need[i])
            return drop(xp, sub, ~keep)
        return on_rows(xp, x, p > 0, fn)
    return min_p


def typical_ge(base: ModuleType) -> Callable[..., Any]:
    def typical(logits: Any, p: Any, min_keep: Any = 0) -> Any:
        xp = get_xp(logits)
        p32 = row_param(p, logits.shape[0], "p", xp)
        # the bug: the prefix stops at the first cum >= p where llama.cpp needs cum > p. On float32
        # sums, "cum >= p" is exactly "cum > the float32 below p"; p >= 1 still returns early
        below = xp.where(p32 >= 1, p32, xp.nextafter(p32, xp.float32(-np.inf)))
        return base.typical(logits, below, min_keep)
    return typical


def top_n_sigma_sample_std(base: ModuleType) -> Callable[..., Any]:
    def top_n_sigma(logits: Any, n: Any) -> Any:
        xp, x, row_max = as_logits(logits)
        B, V = x.shape
        n = row_param(n, B, "n", xp)

        def fn(sub: Any, sel: Any) -> Any:
            fin = xp.isfinite(sub)
            cnt = fin.sum(axis=1)
            z = xp.where(fin, sub, xp.float32(0)).astype(xp.float64)
            with quiet():
                mean = z.sum(axis=1) / cnt
                d = xp.where(fin, z - mean[:, None], 0.0)
                std = xp.sqrt((d * d).sum(axis=1) / (cnt - 1))  # the bug: sample std (n - 1), llama.cpp divides by n
                thr = (row_max[sel] - n[sel] * std).astype(xp.float32)
            return drop(xp, sub, sub < thr[:, None])
        return on_rows(xp, x, (n > 0) & (V >= 2), fn)
    return top_n_sigma


def xtc_removes_all(base: ModuleType) -> Callable[..., Any]:
    def xtc(logits: Any, chance: Any, probability: Any, threshold: Any, min_keep: Any = 0) -> Any:
        xp, x, row_max = as_logits(logits)
        B, V = x.shape
        chance = unit_param(chance, B, "chance", xp, dtype=np.float32)
        prob, thr = row_param(probability, B, "probability", xp), row_param(threshold, B, "threshold", xp)
        mk = nonneg(xp, row_param(min_keep, B, "min_keep", xp, integer=True), "min_keep")
        nf = finite_counts(xp, x)

        def fn(sub: Any, sel: Any) -> Any:
            above = (row_softmax(xp, sub, row_max[sel]) >= thr[sel][:, None]) & (sub > NEG_INF)
            m = above.sum(axis=1)
            apply = (m >= 2) & (nf[sel] - (m - 1) >= mk[sel])
            return drop(xp, sub, above & apply[:, None])  # the bug: the least probable one is not spared
        return on_rows(xp, x, (prob > 0) & (thr <= 0.5) & (nf >= 2) & (chance <= prob), fn)
    return xtc


def xtc_strict(base: ModuleType) -> Callable[..., Any]:
    def xtc(logits: Any, chance: Any, probability: Any, threshold: Any, min_keep: Any = 0) -> Any:
        xp = get_xp(logits)
        t = row_param(threshold, logits.shape[0], "threshold", xp)
        # the bug: p > threshold where llama.cpp has p >= threshold; on float32 probabilities that
        # is exactly p >= the next float32 above the threshold
        return base.xtc(logits, chance, probability, xp.nextafter(t, xp.float32(np.inf)), min_keep)
    return xtc
