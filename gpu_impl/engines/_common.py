"""Shared by the engine chains: token-history masks and ascending-order cuts on fixed-shape rows."""
from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from gpu_impl._array import is_cupy


def history_counts(xp: ModuleType, history: Any, B: int, V: int) -> Any:
    """int32 [B, V] occurrences of each id in ``history`` ([B, H] or [H], -1 = padding;
    ids >= V are ignored, as the engines do)."""
    if hasattr(history, "get") and not is_cupy(xp):
        history = history.get()
    h = xp.asarray(history)
    if h.ndim == 1:
        h = xp.broadcast_to(h, (B, h.shape[0]))
    if h.ndim != 2 or h.shape[0] != B:
        raise ValueError(f"history has shape {tuple(h.shape)} but must be [batch={B}, H]")
    if h.size and (h.dtype == bool or h.dtype.kind not in "iu"):
        raise ValueError(f"history must hold integer token ids, got dtype {h.dtype}")
    h = h.astype(xp.int64)
    if bool((h < -1).any()):
        raise ValueError("history ids must be >= -1 (-1 is padding)")
    r, j = xp.nonzero((h >= 0) & (h < V))
    out = xp.zeros((B, V), dtype=xp.int32)
    if r.size:
        if is_cupy(xp):
            import cupyx
            cupyx.scatter_add(out, (r, h[r, j]), xp.ones(r.shape, dtype=xp.int32))
        else:
            np.add.at(out, (r, h[r, j]), 1)
    return out


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
