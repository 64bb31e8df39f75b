"""Logit transforms driven by token ids: repetition penalties and dense logit bias."""
from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from gpu_impl._array import above_zero, as_logits, is_cupy, row_param


def _history(xp: ModuleType, history: Any, B: int, V: int, ignore_out_of_vocab: bool = False) -> Any:
    """int64 ``[B, H]``; a 1-D history is shared by every row. Ids >= V are refused, or turned
    into padding with ``ignore_out_of_vocab`` (the engines that ignore them)."""
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
    if ignore_out_of_vocab:
        if bool((h < -1).any()):
            raise ValueError("history ids must be >= -1 (-1 is padding)")
        return xp.where(h >= V, -1, h)
    bad = ((h < -1) | (h >= V)).any(axis=1)
    if bool(bad.any()):
        rows = xp.nonzero(bad)[0].tolist()
        raise ValueError(f"history rows {rows} hold ids outside [-1, {V}) (-1 is padding)")
    return h


def _scatter_count(xp: ModuleType, shape: tuple[int, int], rows: Any, cols: Any) -> Any:
    counts = xp.zeros(shape, dtype=xp.int32)
    ones = xp.ones(rows.shape, dtype=xp.int32)
    if is_cupy(xp):
        import cupyx
        cupyx.scatter_add(counts, (rows, cols), ones)
    else:
        np.add.at(counts, (rows, cols), ones)
    return counts


def penalties(logits: Any, history: Any, last_n: Any, repeat: Any, freq: Any, present: Any) -> Any:
    """Repetition, frequency and presence penalties over each row's last ``last_n`` tokens.

    ``history`` [B, H] holds accepted ids in chronological order, -1 = padding (ignored). For
    every token with count c > 0 in the window: ``l = l * repeat if l <= 0 else l / repeat``,
    then ``l -= c * freq + present``. ``last_n <= 0`` or ``repeat == 1, freq == present == 0``
    is a no-op; ``repeat <= 0`` raises.
    """
    xp, x, _ = as_logits(logits)
    B, V = x.shape
    h = _history(xp, history, B, V)
    last_n = row_param(last_n, B, "last_n", xp, integer=True)
    repeat = row_param(repeat, B, "repeat", xp)
    freq = row_param(freq, B, "freq", xp)
    present = row_param(present, B, "present", xp)
    if bool((~above_zero(xp, repeat)).any()):
        raise ValueError(f"parameter repeat must be > 0, got {repeat.tolist()}")
    active = (last_n > 0) & ~((repeat == 1) & (freq == 0) & (present == 0))
    if h.shape[1] == 0 or not bool(active.any()):
        return x.copy()

    valid = h >= 0
    # 1 = newest real token: count real tokens from the right, ignoring padding
    age = xp.cumsum(valid[:, ::-1], axis=1)[:, ::-1]
    window = valid & (age <= last_n[:, None]) & active[:, None]
    r, j = xp.nonzero(window)
    ids = h[r, j]
    counts = _scatter_count(xp, (B, V), r, ids)
    # only the (few) penalised tokens are touched; duplicate window entries of one token read
    # the same total count and write the same value
    c = counts[r, ids].astype(xp.float32)
    old = x[r, ids]
    new = xp.where(old <= 0, old * repeat[r], old / repeat[r]) - (c * freq[r] + present[r])
    out = x.copy()
    out[r, ids] = new
    return out


def logit_bias(logits: Any, bias: Any) -> Any:
    """``l + bias`` with a dense ``bias`` of shape [V] or [B, V]; -inf suppresses a token,
    NaN or +inf raise."""
    xp, x, _ = as_logits(logits)
    B, V = x.shape
    if hasattr(bias, "get") and not is_cupy(xp):
        bias = bias.get()
    b = xp.asarray(bias)
    if b.shape not in ((V,), (B, V)):
        raise ValueError(f"bias has shape {tuple(b.shape)} but must be [{V}] or [{B}, {V}]")
    if b.dtype == bool or b.dtype.kind not in "iuf":
        raise ValueError(f"bias must be numeric, got dtype {b.dtype}")
    b = b.astype(xp.float32)
    bad = ~(b < np.inf)  # NaN and +inf (also a float64 bias that overflows float32)
    if bool(bad.any()):
        where = bad.reshape(-1, V).any(axis=1)
        rows = xp.nonzero(where)[0].tolist()
        raise ValueError(f"bias contains NaN or +inf (rows {rows} of the bias)")
    return x + b
