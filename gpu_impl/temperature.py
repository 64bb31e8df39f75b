"""Temperature: plain (``temp``) and entropy-driven dynamic (``temp_ext``)."""
from __future__ import annotations

from types import ModuleType
from typing import Any

import numpy as np

from gpu_impl._array import NEG_INF, above_zero, as_logits, divide_rows, on_host, param_xp, quiet, row_param
from gpu_impl._deferred import validated
from gpu_impl.softmax import entropy_from_logits


def apply_temp(xp: ModuleType, x: Any, t: Any) -> Any:
    """``l / t`` per row; a row with ``t <= 0`` keeps only its first maximal logit. With ``t``
    on the host the special cases are decided there; on the device both are always applied
    (each is exact where it does not apply), so that nothing is read back."""
    host = on_host(t)
    tx = np if host else xp
    pos = above_zero(tx, t)
    with quiet():
        out = divide_rows(xp, x, tx.where(pos, t, tx.float32(1)))
    pos = xp.asarray(pos)
    if not host or not bool(np.isfinite(t).all()):
        # l / inf: finite logits go to 0, but -inf / inf is NaN and must stay excluded
        out = xp.where(x == NEG_INF, NEG_INF, out)
    if not host or not bool(above_zero(np, t).all()):
        first = xp.argmax(x, axis=1)
        argmax_only = xp.where(xp.arange(x.shape[1])[None, :] == first[:, None], x, NEG_INF)
        out = xp.where(pos[:, None], out, argmax_only)
    return out


@validated
def temp(logits: Any, t: Any) -> Any:
    """``l / t`` for ``t > 0``; for ``t <= 0`` the first maximal logit is kept and every other
    token becomes -inf (nothing is reordered). ``t == 1`` is an exact no-op."""
    xp, x, _ = as_logits(logits)
    t = row_param(t, x.shape[0], "t", param_xp(xp, t))
    if on_host(t) and bool((t == 1).all()):
        return x.copy()
    return apply_temp(xp, x, t)  # l / 1 is exact, so t == 1 rows need no special case


@validated
def temp_ext(logits: Any, t: Any, delta: Any, exponent: Any) -> Any:
    """Dynamic temperature (llama.cpp ``temp_ext``).

    ``delta <= 0``: exactly ``temp(t)``. Otherwise, with n the row's finite-logit count: n <= 1
    leaves the row unchanged; else ``T = lo + (hi - lo) * (H / ln n) ** exponent`` with
    ``lo = max(0, t - delta)``, ``hi = t + delta`` and H the entropy of the row softmax, then
    ``temp(T)`` (``T <= 0`` keeps only the argmax).
    """
    xp, x, row_max = as_logits(logits)
    B = x.shape[0]
    t = row_param(t, B, "t", param_xp(xp, t))
    delta = row_param(delta, B, "delta", param_xp(xp, delta))
    exponent = row_param(exponent, B, "exponent", param_xp(xp, exponent))
    if on_host(delta) and not bool(above_zero(np, delta).any()):
        return temp(x, t)
    t, delta, exponent = (xp.asarray(a) for a in (t, delta, exponent))
    dynamic = above_zero(xp, delta)

    n = xp.isfinite(x).sum(axis=1)
    h, _, _ = entropy_from_logits(xp, x, row_max)
    max_h = xp.log(xp.maximum(n, 2).astype(xp.float32))  # n <= 1 rows are restored below
    lo = xp.maximum(xp.float32(0), t - delta)
    hi = t + delta
    with quiet():  # nH = 0 with a negative exponent gives T = inf: logits become 0, as in C
        dyn_t = lo + (hi - lo) * xp.power(h / max_h, exponent)
    out = apply_temp(xp, x, xp.where(dynamic, dyn_t, t).astype(xp.float32))
    unchanged = dynamic & (n <= 1)
    return xp.where(unchanged[:, None], x, out)  # unconditional: deciding would read the device
