"""top_k, min_p, top_p and the fused llama.cpp chain on device. Each finds, per row, the prefix
of the (descending value, ascending id) order that survives, as its last element (c, cut), then
writes the output in one elementwise pass. Parameters arrive validated (gpu_impl's wrappers do
that on the host); nothing in top_k, top_p or the chain synchronises with the host, so they can
be graph-captured (min_p reads one word when it is not being captured, to skip its fallback,
unless its host parameters already rule the fallback out).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from gpu_impl._graphs import upload
from gpu_impl.kernels._build import THREADS, WIN, fn, grid1, i32, i64, n_chunks, span
from gpu_impl.kernels.select import (N_RANGE, WRITE_ALL, Prefix, empty_prefix, mass_crossing, nth_element,
                                     select_ws_bytes)
from gpu_impl.kernels.softmax_rows import row_max as device_row_max
from gpu_impl.kernels.softmax_rows import row_stats

MASK_DIVIDE, MASK_ONLY = 1, 2  # mask.cu's LC_MASK_*


def mask_prefix(x: Any, keep: Prefix, t: Any = None, *, only: Any = None, out: Any = None) -> Any:
    """float32 [B, V]: ``x`` (divided by ``t[b]`` when given) on each row's prefix, -inf elsewhere.
    With ``only`` (int32 [B]) just those rows are written, into ``out``."""
    import cupy as cp
    B, V = x.shape
    y = cp.empty_like(x) if out is None else out
    flags = (MASK_DIVIDE if t is not None else 0) | (MASK_ONLY if only is not None else 0)
    fn("lc_mask_prefix")((n_chunks(V), B), (THREADS,), (x, i64(V), keep.c, keep.cut, x if t is None else t,
                                                         x if only is None else only, i32(flags), y))
    return y


def count_ge(x: Any, thr: Any, active: Any, count: Any = None) -> Any:
    """uint64 [B]: #{x >= thr[b]} added to ``count`` (zeros when None) for active (int32) rows."""
    import cupy as cp
    B, V = x.shape
    count = cp.zeros(B, cp.uint64) if count is None else count
    cols, per_row = span(B, V)
    fn("lc_count_ge")((per_row, B), (THREADS,), (x, i64(V), thr, active, i64(cols), count))
    return count


def top_k_rows(x: Any, k: Any) -> Any:
    """top_k for int64 ``k`` [B]: rows with ``0 < k < V`` keep their first k; others are copied."""
    import cupy as cp
    keep = empty_prefix(cp, x.shape[0])
    nth_element(x, k.astype(cp.int64, copy=False), None, keep, flags=N_RANGE | WRITE_ALL)
    return mask_prefix(x, keep)


def min_p_rows(x: Any, row_max: Any, p: Any, min_keep: Any, short_possible: bool = True) -> Any:
    """min_p: keep ``x >= max + ln p`` (float32); rows where fewer than ``max(min_keep, 1)``
    survive keep that many first instead. ``p <= 0`` rows are copied. ``row_max`` and ``p`` are
    float32, ``min_keep`` int64. ``short_possible=False`` (the caller knows from host parameters
    that every row has p <= 1 and min_keep <= 1, so the row max itself survives and no row is
    short) skips the fallback and its one-word read."""
    import cupy as cp
    B, V = x.shape
    y = cp.empty_like(x)
    ws = cp.zeros(3 * B + 1, cp.uint32)  # count, done, short (mask.cu's lc_min_p_mask), n_short
    fn("lc_min_p_mask")((n_chunks(V), B), (THREADS,), (x, i64(V), row_max.astype(cp.float32, copy=False),
                                                        p.astype(cp.float32, copy=False),
                                                        min_keep.astype(cp.int64, copy=False), ws, y))
    short = ws[2 * B:3 * B].view(cp.int32)
    # the min_keep fallback: in a captured graph its kernels always run (rows that are not short
    # return at once); launched eagerly, one read of n_short skips them when no row is short
    if short_possible and (cp.cuda.get_current_stream().is_capturing() or int(ws[3 * B])):
        keep = empty_prefix(cp, B)
        nth_element(x, min_keep.astype(cp.int64, copy=False), short, keep)
        mask_prefix(x, keep, only=short, out=y)
    return y


@dataclass
class ChainPlan:
    """Device parameters of top_k -> top_p -> min_p -> temp, one int64/float32/int32 column each
    (views of one buffer, so a plan is one upload), validated and made on the host.

    ``n_k`` is top_k's prefix (V where top_k is off), and must be <= WIN wherever top_k is on;
    ``n_win`` the window's size min(n_k, WIN, V); ``first_only`` marks temp t <= 0 rows (keep the
    first max), ``t`` the divisors (1 elsewhere). Known on the host, so deciding them costs no
    synchronisation: ``divide`` (some t is a divisor), ``wide`` (some row may need the row-wide
    searches: top_k off and V > WIN) and ``min_p_on`` (some row has min_p on).
    """
    n_k: Any
    n_win: Any
    mk_p: Any
    mk_m: Any
    p: Any
    mp: Any
    t: Any
    first_only: Any
    divide: bool
    wide: bool
    min_p_on: bool


def _plan_columns(buf: Any, B: int) -> list[Any]:
    """The columns of a plan buffer (uint8 [48 B]), in ChainPlan's field order: four int64,
    three float32, one int32."""
    ints, floats = buf[:32 * B].view(np.int64), buf[32 * B:44 * B].view(np.float32)
    return ([ints[i * B:(i + 1) * B] for i in range(4)] + [floats[i * B:(i + 1) * B] for i in range(3)]
            + [buf[44 * B:].view(np.int32)])


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
    m = np.broadcast_to(np.asarray(m, np.float32), (B,))
    divide = (t > 0) & (t != 1)
    host = np.empty(48 * B, np.uint8)
    cols = _plan_columns(host, B)
    for col, v in zip(cols, (n_k, np.minimum(n_k, min(WIN, V)), min_keep_p, min_keep_m, p, m,
                             np.where(divide, t, np.float32(1)), t <= 0)):
        col[:] = np.broadcast_to(np.asarray(v).astype(col.dtype), (B,))
    return ChainPlan(*_plan_columns(upload(cp, host), B), divide=bool(divide.any()),
                     wide=bool(V > WIN and (~on).any()), min_p_on=bool((m > 0).any()))


def chain_rows(x: Any, row_max: Any, plan: ChainPlan, out_max: Any = None) -> Any:
    """The fused chain on a validated float32 [B, V] CuPy array: the survivors' prefix is decided
    on a top-W window (radix select, gather, block sort and scan), rows the window cannot decide
    go through the row-wide mass and count searches, and one pass writes the output.
    ``row_max`` (float32 [B]) is read only by those searches; None computes it when needed.
    ``out_max`` (float32 [B]), if given, receives the output's row max (what dist needs)."""
    import cupy as cp
    B, V = x.shape
    if row_max is None and plan.wide:
        row_max = device_row_max(x)[0]
    # one zeroed workspace: every select of the chain (they leave it zeroed), the gather's fill
    # counters and min_p's survivor counts
    sel_bytes = select_ws_bytes(B, V)
    ws = cp.zeros(sel_bytes + 16 * B, cp.uint8)
    sel = ws[:sel_bytes]
    fill, count = ws[sel_bytes:sel_bytes + 4 * B].view(cp.int32), ws[sel_bytes + 8 * B:].view(cp.uint64)
    window = empty_prefix(cp, B)
    win, pending = cp.empty((B, WIN), cp.uint64), cp.empty(B, cp.int32)
    # the select's last launch gathers the window of rows whose prefix needs no tie ids (most);
    # the gather launch does the others and returns at once elsewhere
    nth_element(x, plan.n_win, None, window, ws=sel, gather=(win, fill, pending))
    cols, per_row = span(B, V)
    fn("lc_window_gather")((per_row, B), (THREADS,), (x, i64(V), window.c, window.cut, i64(cols), pending, win,
                                                         fill))
    # chunk partials: the normaliser of rows whose survivors the window may not hold (never read
    # in a plan that is not wide, where x stands in for them)
    part = row_stats(x) if plan.wide else x
    keep = empty_prefix(cp, B)
    n_out, status, thr = cp.empty(B, cp.int64), cp.empty(B, cp.int32), cp.empty(B, cp.float32)
    act_mass, act_ge = cp.empty(B, cp.int32), cp.empty(B, cp.int32)
    fn("lc_window_cut")((B,), (WIN,), (win, fill, i64(V), part, i32(n_chunks(V)), plan.n_k, plan.p, plan.mk_p,
                                       plan.mp, plan.mk_m, plan.first_only, keep.c, keep.cut, n_out, status, thr,
                                       act_mass, act_ge, plan.t, i32(plan.divide),
                                       out_max if out_max is not None else cp.empty(B, cp.float32)))
    if plan.wide:
        crossing = empty_prefix(cp, B)
        mass_crossing(x, plan.p, row_max, act_mass, crossing, ws=sel)
        if plan.min_p_on:
            count_ge(x, thr, act_ge, count)
        n_sel, act_sel = cp.empty(B, cp.int64), cp.empty(B, cp.int32)
        fn("lc_chain_finish")(grid1(B), (128,), (i32(B), i64(V), status, n_out, crossing.c, crossing.cut, crossing.n,
                                                 plan.mk_p, plan.mp, plan.mk_m, count, thr, plan.first_only, keep.c,
                                                 keep.cut, n_sel, act_sel))
        nth_element(x, n_sel, act_sel, keep, ws=sel)
    return mask_prefix(x, keep, plan.t if plan.divide else None)


def top_p_rows(x: Any, row_max: Any, p: Any, min_keep: Any) -> Any:
    """top_p (p, min_keep: validated device arrays) by the row-wide mass crossing alone: four reads
    of the row find the shortest prefix whose fixed-point mass reaches p (rows with p >= 1 keep the
    whole row), min_keep lengthens it where it is shorter (one more select, for those rows only),
    and one pass writes the output. The chain's top-1024 window, which decides a small nucleus in
    a float32 running sum, would cost five more reads here and decide nothing the crossing does not."""
    import cupy as cp
    B, V = x.shape
    if row_max is None:
        row_max = device_row_max(x)[0]
    p = p.astype(cp.float32, copy=False)
    ws = cp.zeros(select_ws_bytes(B, V), cp.uint8)  # both selects leave it zeroed
    keep = empty_prefix(cp, B)
    mass_crossing(x, p, row_max, (p < 1).astype(cp.int32), keep, ws=ws)
    n_sel, act_sel = cp.empty(B, cp.int64), cp.empty(B, cp.int32)
    fn("lc_top_p_finish")(grid1(B), (128,), (i32(B), i64(V), keep.n, min_keep.astype(cp.int64, copy=False), n_sel,
                                             act_sel))
    nth_element(x, n_sel, act_sel, keep, ws=ws)
    return mask_prefix(x, keep)
