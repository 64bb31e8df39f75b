"""top_k, min_p, top_p and the fused llama.cpp chain on device. Each finds, per row, the prefix
of the (descending value, ascending id) order that survives, as its last element (c, cut), then
writes the output in one elementwise pass. Parameters arrive validated (gpu_impl's wrappers do
that on the host); nothing here synchronises with the host, so a chain can be graph-captured.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gpu_impl.kernels._build import THREADS, WIN, fn, grid1, i32, i64, n_chunks, span
from gpu_impl.kernels.select import Prefix, keep_all, mass_crossing, nth_element
from gpu_impl.kernels.softmax_rows import row_stats


def mask_prefix(x: Any, keep: Prefix, t: Any = None) -> Any:
    """float32 [B, V]: ``x`` (divided by ``t[b]`` when given) on each row's prefix, -inf elsewhere."""
    import cupy as cp
    B, V = x.shape
    y = cp.empty_like(x)
    tt = t if t is not None else keep.c  # never read when use_t == 0
    fn("lc_mask_prefix")((n_chunks(V), B), (THREADS,), (x, i64(V), keep.c, keep.cut, tt, i32(t is not None), y))
    return y


def count_ge(x: Any, thr: Any, active: Any) -> Any:
    """uint64 [B]: #{x >= thr[b]} for active rows (0 elsewhere)."""
    import cupy as cp
    B, V = x.shape
    count = cp.zeros(B, cp.uint64)
    cols, per_row = span(B, V)
    fn("lc_count_ge")((per_row, B), (THREADS,), (x, i64(V), thr, active.astype(cp.int32, copy=False), i64(cols), count))
    return count


def top_k_rows(x: Any, k: Any) -> Any:
    """top_k for int64 ``k`` [B]: rows with ``0 < k < V`` keep their first k; others are copied."""
    import cupy as cp
    B, V = x.shape
    keep = keep_all(cp, B, V)
    nth_element(x, k, (k > 0) & (k < V), keep)
    return mask_prefix(x, keep)


def min_p_rows(x: Any, row_max: Any, p: Any, min_keep: Any) -> Any:
    """min_p: keep ``x >= max + ln p`` (float32); rows where fewer than ``max(min_keep, 1)``
    survive keep that many first instead. ``p <= 0`` rows are copied."""
    import cupy as cp

    from gpu_impl._array import above_zero, widen_exact
    B, V = x.shape
    active = above_zero(cp, p)
    # ln p in float64 from the exact widening (CuPy's float32 kernels flush a subnormal p to 0,
    # and ln 0 = -inf would keep every token)
    log_p = cp.log(cp.where(active, widen_exact(cp, p.astype(cp.float32)), 1.0)).astype(cp.float32)
    thr = (row_max + log_p).astype(cp.float32)
    need = cp.minimum(cp.maximum(min_keep, 1), V)
    short = active & (count_ge(x, thr, active).astype(cp.int64) < need)
    # threshold rows: (c, cut) = (thr, V) keeps exactly x >= thr
    keep = Prefix(cp.where(active, thr, cp.float32(-np.inf)).astype(cp.float32), cp.full(B, V, cp.int64),
                  cp.full(B, V, cp.int64))
    nth_element(x, need, short, keep)
    return mask_prefix(x, keep)


@dataclass
class ChainPlan:
    """Device parameters of top_k -> top_p -> min_p -> temp, validated and made on the host.

    ``n_k`` is top_k's prefix (V where top_k is off), and must be <= WIN wherever top_k is on;
    ``first_only`` marks temp t <= 0 rows (keep the first max), ``t`` the divisors (1 elsewhere).
    ``wide`` says whether some row may need the row-wide searches (top_k off and V > WIN); it is
    known on the host from the parameters, so deciding it costs no synchronisation.
    """
    n_k: Any
    p: Any
    mk_p: Any
    mp: Any
    mk_m: Any
    first_only: Any
    t: Any | None
    wide: bool


def plan_chain(B: int, V: int, k: Any, p: Any, min_keep_p: Any, m: Any, min_keep_m: Any, t: Any) -> ChainPlan:
    """From host (NumPy) per-row parameters of length B; raises ValueError if top_k is on with
    k > WIN somewhere (the window cannot hold its survivors: use the unfused filters)."""
    import cupy as cp
    k = np.broadcast_to(np.asarray(k, np.int64), (B,))
    on = (k > 0) & (k < V)
    if (on & (k > WIN)).any():
        raise ValueError(f"fused chain: top_k must be <= {WIN} where it is on, got {k.tolist()}")
    n_k = np.where(on, k, V)
    t = np.broadcast_to(np.asarray(t, np.float32), (B,))
    divide = (t > 0) & (t != 1)

    def dev(v: Any, dtype: Any) -> Any:
        return cp.asarray(np.broadcast_to(np.asarray(v, dtype), (B,)))
    return ChainPlan(dev(n_k, np.int64), dev(p, np.float32), dev(min_keep_p, np.int64), dev(m, np.float32),
                     dev(min_keep_m, np.int64), dev(t <= 0, np.int32),
                     dev(np.where(divide, t, 1), np.float32) if divide.any() else None,
                     bool(V > WIN and (~on).any()))


def chain_rows(x: Any, row_max: Any, plan: ChainPlan, out_max: Any = None) -> Any:
    """The fused chain on a validated float32 [B, V] CuPy array: the survivors' prefix is decided
    on a top-W window (radix select, gather, block sort and scan), rows the window cannot decide
    go through the row-wide mass and count searches, and one pass writes the output.
    ``row_max`` (float32 [B]) is read only by those searches; None computes it when needed.
    ``out_max`` (float32 [B]), if given, receives the output's row max (what dist needs)."""
    import cupy as cp
    B, V = x.shape
    if row_max is None and plan.wide:
        row_max = x.max(axis=1)
    ones = cp.ones(B, cp.int32)
    window = keep_all(cp, B, V)
    nth_element(x, cp.minimum(plan.n_k, min(WIN, V)), ones, window)
    win = cp.empty((B, WIN), cp.uint64)
    fill = cp.zeros(B, cp.int32)
    cols, per_row = span(B, V)
    fn("lc_window_gather")((per_row, B), (THREADS,), (x, i64(V), window.c, window.cut, i64(cols), win, fill))
    part = row_stats(x) if plan.wide else cp.zeros((B, 1, 2), cp.float32)
    keep = keep_all(cp, B, V)
    n_out = cp.empty(B, cp.int64)
    status = cp.empty(B, cp.int32)
    thr = cp.empty(B, cp.float32)
    act_mass = cp.empty(B, cp.int32)
    act_ge = cp.empty(B, cp.int32)
    fn("lc_window_cut")((B,), (WIN,), (win, fill, i64(V), part, i32(part.shape[1]), plan.n_k, plan.p, plan.mk_p,
                                       plan.mp, plan.mk_m, plan.first_only, keep.c, keep.cut, n_out, status, thr,
                                       act_mass, act_ge, plan.t if plan.t is not None else thr,
                                       i32(plan.t is not None), out_max if out_max is not None else cp.empty(B, cp.float32)))
    if plan.wide:
        crossing = keep_all(cp, B, V)
        mass_crossing(x, plan.p, row_max, act_mass, crossing)
        n_sel = cp.empty(B, cp.int64)
        act_sel = cp.empty(B, cp.int32)
        fn("lc_chain_finish")(grid1(B), (128,), (i32(B), i64(V), status, n_out, crossing.n, plan.mk_p, plan.mp,
                                                 plan.mk_m, count_ge(x, thr, act_ge), plan.first_only, n_sel, act_sel))
        nth_element(x, n_sel, act_sel, keep)
    return mask_prefix(x, keep, plan.t)


def top_p_rows(x: Any, row_max: Any, p: Any, min_keep: Any) -> Any:
    """top_p (p, min_keep: validated device arrays) through the chain with only top_p on."""
    import cupy as cp
    B, V = x.shape
    zeros_i, zeros_f = cp.zeros(B, cp.int64), cp.zeros(B, cp.float32)
    plan = ChainPlan(cp.full(B, V, cp.int64), p.astype(cp.float32), min_keep.astype(cp.int64), zeros_f, zeros_i,
                     cp.zeros(B, cp.int32), None, V > WIN)
    return chain_rows(x, row_max, plan)
