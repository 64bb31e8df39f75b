"""llama.cpp's default chain on fixed-shape rows, composed from gpu_impl's samplers:
penalties -> top_k -> top_p -> min_p -> temperature (last)."""
from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from gpu_impl._array import as_logits, check_row_max, on_device, row_param
from gpu_impl._deferred import validated
from gpu_impl._graphs import replayed
from gpu_impl.penalties import penalised
from gpu_impl.temperature import temp
from gpu_impl.truncation import min_p, top_k, top_p


@replayed()
@validated
def llama_cpp_chain(logits: Any, history: Any, last_n: Any, repeat: Any, freq: Any, present: Any,
                    k: Any, p: Any, m: Any, t: Any) -> Any:
    """The chain; its checks are read once, when it returns (``gpu_impl._deferred``)."""
    return _chain(logits, history, last_n, repeat, freq, present, k, p, m, t, False)[1]


def _chain(logits: Any, history: Any, last_n: Any, repeat: Any, freq: Any, present: Any, k: Any, p: Any, m: Any,
           t: Any, want_max: bool) -> tuple[ModuleType, Any, Any]:
    """``(xp, rows, their row max)``; the max only from the fused kernels asked with ``want_max``
    (they write it as they write the rows), else None."""
    xp, x, row_max, changed = penalised(logits, history, last_n, repeat, freq, present)
    if on_device(xp, x):  # one fused pass over a top-k window (gpu_impl.kernels.chain_rows)
        from gpu_impl import kernels
        if changed:  # penalties may overflow a logit to +inf: checked as the unfused chain does
            xp, x, row_max = as_logits(x)
        B, V = x.shape
        # validated on the host, in the order (and with the messages) of the unfused chain
        kk = row_param(k, B, "k", np, integer=True)
        pp, mm, tt = row_param(p, B, "p", np), row_param(m, B, "p", np), row_param(t, B, "t", np)
        if not ((kk > kernels.WIN) & (kk < V)).any():
            plan = kernels.plan_chain(B, V, kk, pp, 0, mm, 0, tt)
            out_max = xp.empty(B, xp.float32) if want_max else None
            return xp, kernels.chain_rows(xp.ascontiguousarray(x), row_max, plan, out_max=out_max), out_max
    # each filter returns a new array, so the unpenalised input itself is never written
    return xp, temp(min_p(top_p(top_k(x, k), p, 0), m, 0), t), None


@replayed(data=("u",))
@validated
def llama_cpp_chain_dist(logits: Any, history: Any, last_n: Any, repeat: Any, freq: Any, present: Any,
                         k: Any, p: Any, m: Any, t: Any, u: Any) -> Any:
    """The chain, then dist with the uniform ``u`` of each row: the token id an engine emits
    (one read of the checks for both). After the fused chain, dist takes the row max the chain
    wrote instead of reading the rows again; its checks are the same (dividing by t can overflow
    a logit to +inf, which shows in the max)."""
    from gpu_impl.selection import dist, dist_of_rows
    xp, y, y_max = _chain(logits, history, last_n, repeat, freq, present, k, p, m, t, True)
    if y_max is None:
        return dist(y, u)
    check_row_max(xp, y_max)
    return dist_of_rows(xp, y, y_max, u)
