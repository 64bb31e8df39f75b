"""Shared by the engine chains: token-history masks and ascending-order cuts on fixed-shape rows."""
from __future__ import annotations

from types import ModuleType
from typing import Any


from gpu_impl.penalties import _history, _scatter_count


def history_counts(xp: ModuleType, history: Any, B: int, V: int) -> Any:
    """int32 [B, V] occurrences of each id in ``history`` ([B, H] or [H], -1 = padding;
    ids >= V are ignored, as the engines do)."""
    h = _history(xp, history, B, V, ignore_out_of_vocab=True)
    r, j = xp.nonzero(h >= 0)
    return _scatter_count(xp, (B, V), r, h[r, j])


def first_n_ascending(xp: ModuleType, x: Any, sorted_asc: Any, n: Any) -> Any:
    """Mask of the first ``n`` tokens in ascending (value, id) order — lower ids first among
    equal values. ``sorted_asc`` is ``x`` sorted ascending along rows."""
    V = x.shape[1]
    c = xp.take_along_axis(sorted_asc, xp.clip(n - 1, 0, V - 1)[:, None], axis=1)[:, 0]
    cc = c[:, None]
    below = x < cc
    tie = x == cc
    need = n - below.sum(axis=1)
    rank = xp.cumsum(tie, axis=1, dtype=xp.int32)
    out = below | (tie & (rank <= need[:, None]))
    return out & (n > 0)[:, None]
