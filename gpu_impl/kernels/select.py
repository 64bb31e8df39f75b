"""The n-th element of each row, in (descending value, ascending id) order, by radix select on the
float bits: a prefix of that order is then the elementwise test ``v > c or (v == c and id <= cut)``.

Two goals: a count (top_k's k) or a mass (top_p's crossing, ``p`` of the fixed-point mass of
``exp(x - row_max)``). Each call is four launches over the same grid, whatever the rows ask
(rows that do not run return at once), so there is no host decision and no synchronisation.
"""
from __future__ import annotations

from typing import Any, NamedTuple

from gpu_impl.kernels._build import BINS, STATE_BYTES, THREADS, fn, i32, i64, span

# flags of a select (radix_select.cu's LC_SEL_*)
MASS, ACTIVE, LO, N_RANGE, WRITE_ALL, GATHER = 1, 2, 4, 8, 16, 32


class Prefix(NamedTuple):
    """Per-row prefix: value c (float32), id of the last kept tie (int64), length n (int64)."""
    c: Any
    cut: Any
    n: Any


def empty_prefix(cp: Any, B: int) -> Prefix:
    """Storage for a select's result (every row is written by whoever fills it)."""
    return Prefix(cp.empty(B, cp.float32), cp.empty(B, cp.int64), cp.empty(B, cp.int64))


def select_ws_bytes(B: int, V: int) -> int:
    """Bytes of a select's workspace (radix_select.cu's lc_select_ws): state, mass and count
    histograms, four pass counters and the tie count of every block."""
    return -(-B * (STATE_BYTES + BINS * 12 + 16 + 4 * span(B, V)[1]) // 16) * 16  # what follows stays aligned


def select_workspace(B: int, V: int) -> Any:
    """A zeroed workspace; every select leaves it zeroed again, so one serves a whole chain."""
    import cupy as cp
    return cp.zeros(select_ws_bytes(B, V), cp.uint8)


def _select(x: Any, flags: int, out: Prefix, n: Any = None, p: Any = None, row_max: Any = None, active: Any = None,
            lo: Prefix | None = None, ws: Any = None, gather: tuple[Any, Any, Any] | None = None) -> None:
    B, V = x.shape
    cols, per_row = span(B, V)
    ws = select_workspace(B, V) if ws is None else ws
    if active is not None:
        flags |= ACTIVE
    if lo is not None:
        flags |= LO
    # an argument the flags leave unread still needs a device pointer: x stands in for it
    rows = (x if n is None else n, x if p is None else p, x if row_max is None else row_max,
            x if active is None else active, x if lo is None else lo.c, x if lo is None else lo.cut)
    for digit_pass in range(3):
        fn("lc_radix_pass")((per_row, B), (THREADS,), (x, i64(V), i64(cols), i32(digit_pass), i32(flags), *rows, ws))
    if gather is not None:
        flags |= GATHER
    win, fill, pending = (x, x, x) if gather is None else gather
    fn("lc_radix_finish")((per_row, B), (THREADS,), (x, i64(V), i64(cols), i32(flags), ws, out.c, out.cut, out.n,
                                                     win, fill, pending))


def nth_element(x: Any, n: Any, active: Any, out: Prefix, lo: Prefix | None = None, *, flags: int = 0,
                ws: Any = None, gather: tuple[Any, Any, Any] | None = None) -> None:
    """Writes into ``out`` the ``n[b]``-th element (1-based, clipped to [1, V]) of every running
    row (``active[b] != 0``, every row when ``active`` is None), counting only the prefix ``lo``
    when given; other rows of ``out`` are left as they are (``flags=WRITE_ALL``: the whole row).
    ``n`` is int64 and ``active`` int32, as the kernels read them. ``gather = (win, fill,
    pending)``: the last launch also appends each row's prefix to its window where it is known
    there, and marks in ``pending`` (int32) the rows left to ``lc_window_gather``."""
    _select(x, flags, out, n=n, active=active, lo=lo, ws=ws, gather=gather)


def mass_crossing(x: Any, p: Any, row_max: Any, active: Any, out: Prefix, lo: Prefix | None = None, *,
                  ws: Any = None) -> None:
    """Writes into ``out`` the first element whose running probability mass (in the row's order,
    over the prefix ``lo``) reaches ``p`` (float32): the shortest prefix with mass >= p (top_p's
    cut). Rows that do not run (inactive, or no finite logit) get the whole row."""
    _select(x, MASS | WRITE_ALL, out, p=p, row_max=row_max, active=active, lo=lo, ws=ws)


def nth_largest(x: Any, n: Any) -> Any:
    """float32 [B]: the value at descending position ``n - 1`` of each row (``1 <= n <= V``)."""
    import cupy as cp
    out = empty_prefix(cp, x.shape[0])
    nth_element(x, n.astype(cp.int64, copy=False), None, out)
    return out.c
