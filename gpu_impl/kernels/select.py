"""The n-th element of each row, in (descending value, ascending id) order, by radix select on the
float bits: a prefix of that order is then the elementwise test ``v > c or (v == c and id <= cut)``.

Two goals: a count (top_k's k) or a mass (top_p's crossing, ``p`` of the fixed-point mass of
``exp(x - row_max)``). Each call launches the same ten kernels for every row; rows with
``active == 0`` return at once, so there is no host decision and no synchronisation.
"""
from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from gpu_impl.kernels._build import BINS, STATE_BYTES, THREADS, fn, grid1, i32, i64, n_chunks, span


class Prefix(NamedTuple):
    """Per-row prefix: value c (float32), id of the last kept tie (int64), length n (int64)."""
    c: Any
    cut: Any
    n: Any


def keep_all(cp: Any, B: int, V: int) -> Prefix:
    """The whole row (what a no-op filter keeps)."""
    return Prefix(cp.full(B, -np.inf, cp.float32), cp.full(B, V, cp.int64), cp.full(B, V, cp.int64))


def _select(x: Any, mode: int, n: Any, p: Any, row_max: Any, active: Any, lo: Prefix | None, out: Prefix) -> None:
    import cupy as cp
    B, V = x.shape
    st = cp.empty(B * STATE_BYTES, cp.uint8)
    lo_c = lo.c if lo is not None else cp.full(B, -np.inf, cp.float32)
    lo_cut = lo.cut if lo is not None else cp.full(B, V, cp.int64)
    fn("lc_select_init")(grid1(B), (128,), (st, i32(B), i64(V), n, p, row_max, active, lo_c, lo_cut, i32(mode)))
    hist_count = cp.zeros((B, BINS), cp.uint32)
    hist_mass = cp.zeros((B, BINS), cp.uint64)
    cols, per_row = span(B, V)
    for digit_pass in range(3):
        fn("lc_radix_hist")((per_row, B), (THREADS,), (x, i64(V), st, i32(digit_pass), i64(cols), hist_count, hist_mass))
        fn("lc_radix_scan")((B,), (1024,), (st, i32(digit_pass), hist_count, hist_mass))
    nc = n_chunks(V)
    chunk_count = cp.empty((B, nc), cp.uint32)
    fn("lc_tie_count")((nc, B), (THREADS,), (x, i64(V), st, i32(nc), chunk_count))
    fn("lc_tie_cut")((B,), (THREADS,), (x, i64(V), st, i32(nc), chunk_count, out.c, out.cut, out.n))


def nth_element(x: Any, n: Any, active: Any, out: Prefix, lo: Prefix | None = None) -> None:
    """Writes into ``out`` the ``n[b]``-th element (1-based, clipped to [1, V]) of every active
    row, counting only the prefix ``lo`` when given; other rows of ``out`` are left as they are."""
    import cupy as cp
    B = x.shape[0]
    dummy = cp.zeros(B, cp.float32)
    _select(x, 0, n.astype(cp.int64, copy=False), dummy, dummy, active.astype(cp.int32, copy=False), lo, out)


def mass_crossing(x: Any, p: Any, row_max: Any, active: Any, out: Prefix, lo: Prefix | None = None) -> None:
    """Writes into ``out`` the first element whose running probability mass (in the row's order,
    over the prefix ``lo``) reaches ``p``: the shortest prefix with mass >= p (top_p's cut)."""
    import cupy as cp
    B = x.shape[0]
    _select(x, 1, cp.ones(B, cp.int64), p.astype(cp.float32, copy=False), row_max.astype(cp.float32, copy=False),
            active.astype(cp.int32, copy=False), lo, out)


def nth_largest(x: Any, n: Any) -> Any:
    """float32 [B]: the value at descending position ``n - 1`` of each row (``1 <= n <= V``)."""
    import cupy as cp
    B, V = x.shape
    out = keep_all(cp, B, V)
    nth_element(x, n, cp.ones(B, cp.int32), out)
    return out.c
