"""Sampler-zoo bugs in the value-changing and selecting functions: softmax, temp, dist, greedy,
penalties and logit_bias (see ``truncation_bugs`` for the conventions)."""
from __future__ import annotations

from types import ModuleType
from typing import Any, Callable

import numpy as np

from gpu_impl._array import NEG_INF, _to_float32, as_logits, get_xp, quiet, require_candidates, row_param, unit_param
from gpu_impl._order import first_true, last_true, sorted_top
from gpu_impl.penalties import _history, _scatter_count
from gpu_impl.softmax import exp_shifted, row_softmax


# --- softmax, temperature ---------------------------------------------------------------------

def softmax_top1000(base: ModuleType) -> Callable[..., Any]:
    def softmax(logits: Any) -> Any:
        xp, x, row_max = as_logits(logits)
        e, _ = exp_shifted(xp, x, row_max)
        s = sorted_top(xp, e, 1000).sum(axis=1)  # the bug: normaliser over the 1000 largest weights only
        return e / xp.where(s > 0, s, 1)[:, None]
    return softmax


def temp_on_probabilities(base: ModuleType) -> Callable[..., Any]:
    def temp(logits: Any, t: Any) -> Any:
        xp, x, _ = as_logits(logits)
        t = row_param(t, x.shape[0], "t", xp)
        # the bug: T applied to the probability buffer (p / T, then renormalised: the identity),
        # while the logits are passed on untouched, so any t > 0 has no effect; t <= 0 still
        # takes the greedy branch, which is tested before the division
        return xp.where((t > 0)[:, None], x, base.temp(x, xp.where(t > 0, 1, t)))
    return temp


def temp_multiplies(base: ModuleType) -> Callable[..., Any]:
    def temp(logits: Any, t: Any) -> Any:
        xp, x, _ = as_logits(logits)
        t = row_param(t, x.shape[0], "t", xp)
        with quiet():  # the bug: l * t (a sharper row for t < 1, flatter for t > 1)
            scaled = xp.where(x == NEG_INF, NEG_INF, x * xp.where(t > 0, t, 1)[:, None])
        return xp.where((t > 0)[:, None], scaled, base.temp(x, xp.where(t > 0, 1, t)))
    return temp


def temp_divides_by_zero(base: ModuleType) -> Callable[..., Any]:
    def temp(logits: Any, t: Any) -> Any:
        xp, x, _ = as_logits(logits)
        t = row_param(t, x.shape[0], "t", xp)
        with quiet():
            return x / t[:, None]  # the bug: no t <= 0 branch: l / 0 = ±inf or NaN, l / -1 flips the row
    return temp


# --- selection --------------------------------------------------------------------------------

def _inverse_cdf(xp: Any, cdf: Any, target: Any, weight: Any) -> Any:
    """First token with weight whose running value reaches ``target``; else the last one with
    weight (llama.cpp's fallback). Only the running value is buggy in the mutants below."""
    hit = (cdf >= target[:, None]) & (weight > 0)
    return xp.where(hit.any(axis=1), first_true(xp, hit), last_true(xp, weight > 0)).astype(xp.int64)


def dist_fp16_cdf(base: ModuleType) -> Callable[..., Any]:
    def dist(logits: Any, u: Any) -> Any:
        xp, x, row_max = as_logits(logits)
        require_candidates(xp, row_max, "dist")
        u = unit_param(u, x.shape[0], "u", xp)
        p = row_softmax(xp, x, row_max)
        # the bug: a running sum rounded to fp16 at every step. Taken on the host, because CuPy's
        # cumsum of float16 accumulates wider and rounds only its output (measured on an H100: the
        # mutant then survived every dist property under --backend cupy)
        p16 = (p.get() if hasattr(p, "get") else p).astype(np.float16)
        cdf = np.cumsum(p16, axis=1, dtype=np.float16)
        return _inverse_cdf(xp, xp.asarray(cdf.astype(np.float64)), u, p)
    return dist


def dist_unnormalised_cdf(base: ModuleType) -> Callable[..., Any]:
    def dist(logits: Any, u: Any) -> Any:
        xp, x, row_max = as_logits(logits)
        require_candidates(xp, row_max, "dist")
        u = unit_param(u, x.shape[0], "u", xp)
        e, _ = exp_shifted(xp, x, row_max)
        run = xp.cumsum(e, axis=1, dtype=xp.float64)
        return _inverse_cdf(xp, run, u, e)  # the bug: u compared with sum(e) (not 1), S·u expected
    return dist


def dist_first_uniform(base: ModuleType) -> Callable[..., Any]:
    def dist(logits: Any, u: Any) -> Any:
        xp, x, _ = as_logits(logits)
        u = unit_param(u, x.shape[0], "u", xp)
        return base.dist(logits, xp.broadcast_to(u[:1], u.shape))  # the bug: row 0's uniform for every row
    return dist


def dist_nan_out_of_range(base: ModuleType) -> Callable[..., Any]:
    def dist(logits: Any, u: Any) -> Any:
        xp = get_xp(logits)
        x = _to_float32(xp, xp.asarray(logits), "logits")
        B, V = x.shape
        u = unit_param(u, B, "u", xp)
        # the bug: no NaN check. On a NaN row S·u is NaN, no running sum ever reaches it, and the
        # search returns its "not found" index V, one past the end
        nan_row = xp.isnan(x).any(axis=1)
        ids = xp.full(B, V, dtype=xp.int64)
        ok = xp.nonzero(~nan_row)[0]
        if ok.size:
            ids[ok] = base.dist(x[ok], u[ok])
        return ids
    return dist


def greedy_nan_minus_one(base: ModuleType) -> Callable[..., Any]:
    def greedy(logits: Any) -> Any:
        xp = get_xp(logits)
        x = _to_float32(xp, xp.asarray(logits), "logits")
        # the bug: no validation; "first index equal to the row max" finds nothing on a NaN row
        # (NaN == NaN is false) and returns -1
        at_max = x == x.max(axis=1)[:, None]
        return xp.where(at_max.any(axis=1), first_true(xp, at_max), -1).astype(xp.int64)
    return greedy


# --- penalties, logit bias --------------------------------------------------------------------

def repeat_divides_negative(base: ModuleType) -> Callable[..., Any]:
    def penalties(logits: Any, history: Any, last_n: Any, repeat: Any, freq: Any, present: Any) -> Any:
        xp, x, _ = as_logits(logits)
        B, V = x.shape
        h = _history(xp, history, B, V)
        last_n = row_param(last_n, B, "last_n", xp, integer=True)
        repeat, freq = row_param(repeat, B, "repeat", xp), row_param(freq, B, "freq", xp)
        present = row_param(present, B, "present", xp)
        active = (last_n > 0) & ~((repeat == 1) & (freq == 0) & (present == 0))
        valid = h >= 0
        age = xp.cumsum(valid[:, ::-1], axis=1)[:, ::-1]
        r, j = xp.nonzero(valid & (age <= last_n[:, None]) & active[:, None])
        ids = h[r, j]
        c = _scatter_count(xp, (B, V), r, ids)[r, ids].astype(xp.float32)
        out = x.copy()
        # the bug: l / repeat for every penalised token, so a negative logit moves towards 0
        # (more likely) where llama.cpp multiplies it by repeat (less likely)
        out[r, ids] = x[r, ids] / repeat[r] - (c * freq[r] + present[r])
        return out
    return penalties


def penalties_whole_history(base: ModuleType) -> Callable[..., Any]:
    def penalties(logits: Any, history: Any, last_n: Any, repeat: Any, freq: Any, present: Any) -> Any:
        xp = get_xp(logits)
        h = xp.asarray(history)
        lb = xp.asarray(last_n)
        # the bug: the window is the whole history; last_n only switches the penalty on or off
        window = xp.where(lb > 0, max(int(h.shape[-1]), 1), lb)
        return base.penalties(logits, history, window, repeat, freq, present)
    return penalties


def logit_bias_wrong_row(base: ModuleType) -> Callable[..., Any]:
    def logit_bias(logits: Any, bias: Any) -> Any:
        xp = get_xp(logits)
        b = xp.asarray(bias)
        if b.ndim == 2 and b.shape[0] > 1:
            b = xp.roll(b, 1, axis=0)  # the bug: row b gets row b-1's bias (an off-by-one batch index)
        return base.logit_bias(logits, b)
    return logit_bias
