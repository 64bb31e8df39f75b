"""Order statistics on fixed-shape rows.

llama.cpp sorts a candidate list; here nothing is reordered. "The first n tokens" always means
the first n in *descending logit order, ties broken by lower token id*, and is expressed as a
mask built from one threshold value per row plus, only when ties straddle the boundary, a
running count of the tied tokens.
"""
from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from gpu_impl._array import is_cupy, on_device


def finite_counts(xp: ModuleType, x: Any) -> Any:
    return xp.isfinite(x).sum(axis=1)


def sorted_top(xp: ModuleType, x: Any, m: int, nf: Any = None) -> Any:
    """The ``m`` largest values of each row, in descending order: ``[B, m]``."""
    B, V = x.shape
    m = max(1, min(int(m), V))
    if not is_cupy(xp) and 4 * m < V:
        nf = finite_counts(xp, x) if nf is None else nf
        # introselect degrades badly on long runs of equal values (masked -inf tokens), where a
        # full sort is several times faster; partition only nearly unmasked rows
        if int(nf.min()) * 16 >= 15 * V:
            part = np.partition(x, V - m, axis=1)[:, V - m:]
            return np.sort(part, axis=1)[:, ::-1]
    return xp.sort(x, axis=1)[:, ::-1][:, :m]


def nth_largest(xp: ModuleType, x: Any, n: Any, nf: Any = None) -> Any:
    """The value at descending position ``n - 1`` of each row (``1 <= n <= V``)."""
    if on_device(xp, x):  # radix select: no sort of V
        from gpu_impl.kernels import nth_largest as radix_nth
        return radix_nth(xp.ascontiguousarray(x, dtype=xp.float32), n)
    top = sorted_top(xp, x, int(n.max()), nf)
    return xp.take_along_axis(top, (n - 1)[:, None], axis=1)[:, 0]


def first_true(xp: ModuleType, mask: Any) -> Any:
    # argmax over uint8 returns the first maximum on both backends (bool argmax is less portable)
    return xp.argmax(mask.view(xp.uint8), axis=1)


def first_reach(xp: ModuleType, cum: Any, thr: Any, *, strict: bool = False) -> Any:
    """Column of the first ``cum >= thr`` (``> thr`` if ``strict``) per row; ``cum.shape[1]``
    if none. ``thr`` is one value per row.

    Never "count of cum < thr": that equals the first crossing only for a running sum that
    never decreases, which holds for NumPy's left-to-right cumsum but not for a tree (Blelloch)
    scan such as CuPy's, whose float partial sums can step down by an ulp.
    """
    t = thr[:, None]
    hit = cum > t if strict else cum >= t
    return xp.where(hit.any(axis=1), first_true(xp, hit), cum.shape[1])


def last_true(xp: ModuleType, mask: Any) -> Any:
    """Column of the last True of each row (-1 if none); no reversed views needed."""
    return xp.where(mask, xp.arange(mask.shape[1]), -1).max(axis=1)


def nth_true(xp: ModuleType, mask: Any, r: Any) -> Any:
    """Column of the ``(r + 1)``-th True of each row."""
    rank = xp.cumsum(mask, axis=1, dtype=xp.int32)
    return first_true(xp, mask & (rank == (r + 1)[:, None]))


def keep_ranked(xp: ModuleType, before: Any, tie: Any, n: Any) -> Any:
    """``before`` plus the lowest-id ``n - count(before)`` tokens of ``tie``."""
    need = n - before.sum(axis=1)
    if bool((tie.sum(axis=1) > need).any()):  # the running count is only paid for real ties
        rank = xp.cumsum(tie, axis=1, dtype=xp.int32)
        tie = tie & (rank <= need[:, None])
    return before | tie


def keep_first_n(xp: ModuleType, x: Any, c: Any, n: Any) -> Any:
    """Mask of the first ``n`` tokens in (descending logit, ascending id) order.

    ``c`` is the value at position ``n - 1``. When ``c`` is -inf every finite token is kept and
    the "kept" -inf tokens would stay -inf anyway, so they are not ranked.
    """
    cc = c[:, None]
    return keep_ranked(xp, x > cc, (x == cc) & xp.isfinite(cc), n)
