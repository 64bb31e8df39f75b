"""Logit transforms driven by token ids: repetition penalties and dense logit bias."""
from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from gpu_impl._array import above_zero, as_logits, is_cupy, on_host, param_xp, quiet, row_param
from gpu_impl._deferred import check, validated
from gpu_impl._graphs import upload


def _history(xp: ModuleType, history: Any, B: int, V: int, ignore_out_of_vocab: bool = False) -> Any:
    """int64 ``[B, H]``; a 1-D history is shared by every row. Ids >= V are refused, or turned
    into padding with ``ignore_out_of_vocab`` (the engines that ignore them). A history on the
    host is checked there (at once); one on the device by deferred flags, and its refused ids
    are turned into padding meanwhile, so that nothing indexes outside the row before the
    call raises."""
    if hasattr(history, "get") and not is_cupy(xp):
        history = history.get()
    hx = param_xp(xp, history)
    h = hx.asarray(history)
    if h.ndim == 1:
        h = hx.broadcast_to(h, (B, h.shape[0]))
    if h.ndim != 2 or h.shape[0] != B:
        raise ValueError(f"history has shape {tuple(h.shape)} but must be [batch={B}, H]")
    if h.size and (h.dtype == bool or h.dtype.kind not in "iu"):
        raise ValueError(f"history must hold integer token ids, got dtype {h.dtype}")
    h = h.astype(hx.int64, copy=False)  # never written: the checks and the sanitising make new arrays
    if ignore_out_of_vocab:
        if on_host(h):
            if bool((h < -1).any()):
                raise ValueError("history ids must be >= -1 (-1 is padding)")
        else:
            check(h < -1, lambda: "history ids must be >= -1 (-1 is padding)")
        return xp.asarray(hx.where(h >= V, -1, h))
    # h + 1 in [0, V] read as unsigned: one comparison tests both ends (an id below -1 wraps to a
    # huge value), two elementwise launches fewer on the device than (h < -1) | (h >= V)
    out_of_range = (h + 1).view(hx.uint64) > V

    def message() -> str:
        rows = hx.nonzero(out_of_range.any(axis=1))[0].tolist()
        return f"history rows {rows} hold ids outside [-1, {V}) (-1 is padding)"
    if on_host(h):
        if bool(out_of_range.any()):
            raise ValueError(message())
        return upload(xp, h)
    check(out_of_range, message)
    return xp.where(out_of_range, -1, h)


def _scatter_count(xp: ModuleType, shape: tuple[int, int], rows: Any, cols: Any, weights: Any = None) -> Any:
    """Per-(row, token) sum of ``weights`` (1 for each entry when None)."""
    counts = xp.zeros(shape, dtype=xp.int32)
    weights = xp.ones(rows.shape, dtype=xp.int32) if weights is None else weights
    if is_cupy(xp):
        import cupyx
        cupyx.scatter_add(counts, (rows, cols), weights)
    else:
        np.add.at(counts, (rows, cols), weights)
    return counts


def penalised(logits: Any, history: Any, last_n: Any, repeat: Any, freq: Any,
              present: Any) -> tuple[ModuleType, Any, Any, bool]:
    """``(xp, x, row_max, changed)``: the validated float32 logits with the penalties applied,
    or, when the parameters make them a no-op (``changed`` False), the validated input itself
    (not a copy) and its row max. Parameters given on the host decide that with no device read."""
    xp, x, row_max = as_logits(logits)
    B, V = x.shape
    h = _history(xp, history, B, V)
    last_n = row_param(last_n, B, "last_n", param_xp(xp, last_n), integer=True)
    repeat = row_param(repeat, B, "repeat", param_xp(xp, repeat))
    freq = row_param(freq, B, "freq", param_xp(xp, freq))
    present = row_param(present, B, "present", param_xp(xp, present))
    if on_host(repeat):
        if bool((~above_zero(np, repeat)).any()):
            raise ValueError(f"parameter repeat must be > 0, got {repeat.tolist()}")
    else:
        check(~above_zero(xp, repeat), lambda: f"parameter repeat must be > 0, got {repeat.tolist()}")
    params = (last_n, repeat, freq, present)
    if not all(on_host(a) for a in params):  # on the device: the dense path below runs, reading nothing
        last_n, repeat, freq, present = (upload(xp, a) for a in params)
    # on the host when every parameter was given there: then deciding the no-op reads nothing
    active = (last_n > 0) & ~((repeat == 1) & (freq == 0) & (present == 0))
    if h.shape[1] == 0 or (on_host(active) and not bool(active.any())):
        return xp, x, row_max, False
    # uploaded once per content (a graph's capture finds them on the device)
    last_n, repeat, freq, present, active = (upload(xp, a) for a in (last_n, repeat, freq, present, active))

    valid = h >= 0
    # 1 = newest real token: count real tokens from the right, ignoring padding
    age = xp.cumsum(valid[:, ::-1], axis=1)[:, ::-1]
    window = valid & (age <= last_n[:, None]) & active[:, None]
    # every history entry (no nonzero: its size would be a device read) counts its token when in
    # the window; an entry outside it (padding reads token 0) writes back the value every entry
    # of its token writes, which is a function of (row, token) alone, so duplicates agree
    rows = xp.broadcast_to(xp.arange(B)[:, None], h.shape)
    ids = xp.where(valid, h, 0)
    counts = _scatter_count(xp, (B, V), rows, ids, window.astype(xp.int32))
    c = counts[rows, ids]
    old = x[rows, ids]
    r = repeat[:, None]
    with quiet():  # a huge logit over a small penalty overflows to inf, as float32 arithmetic does
        new = xp.where(old <= 0, old * r, old / r) - (c.astype(xp.float32) * freq[:, None] + present[:, None])
    out = x.copy()
    out[rows, ids] = xp.where(c > 0, new, old)
    return xp, out, None, True


@validated
def penalties(logits: Any, history: Any, last_n: Any, repeat: Any, freq: Any, present: Any) -> Any:
    """Repetition, frequency and presence penalties over each row's last ``last_n`` tokens.

    ``history`` [B, H] holds accepted ids in chronological order, -1 = padding (ignored). For
    every token with count c > 0 in the window: ``l = l * repeat if l <= 0 else l / repeat``,
    then ``l -= c * freq + present``. ``last_n <= 0`` or ``repeat == 1, freq == present == 0``
    is a no-op; ``repeat <= 0`` raises.
    """
    _, x, _, changed = penalised(logits, history, last_n, repeat, freq, present)
    return x if changed else x.copy()


@validated
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
    check(bad, lambda: f"bias contains NaN or +inf (rows {xp.nonzero(bad.reshape(-1, V).any(axis=1))[0].tolist()} "
                       "of the bias)")
    with quiet():  # -inf + inf only where the deferred check above refuses the bias
        return x + b
