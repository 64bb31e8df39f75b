"""Row softmax and row entropy, float32, llama.cpp's ``softmax_impl`` on a masked row.

p_i = exp(l_i - max) / sum_j exp(l_j - max): the max is subtracted first so exp never
overflows; -inf gives p = 0. A row with no finite logit has no distribution: all zeros.
"""
from __future__ import annotations

from types import ModuleType
from typing import Any

from gpu_impl._array import as_logits, on_device, quiet


def exp_shifted(xp: ModuleType, x: Any, row_max: Any) -> tuple[Any, Any]:
    """``(e, s)``: ``e = exp(x - max)`` (float32 [B, V]) and its row sums ``s`` [B]."""
    m = xp.where(row_max == -xp.inf, 0, row_max).astype(xp.float32)  # all -inf row: e = 0, not NaN
    with quiet():
        e = xp.exp(x - m[:, None])
    return e, e.sum(axis=1)


def row_softmax(xp: ModuleType, x: Any, row_max: Any) -> Any:
    """Softmax of validated float32 rows (no checks)."""
    if on_device(xp, x):
        from gpu_impl.kernels import softmax_rows
        return softmax_rows(x)
    e, s = exp_shifted(xp, x, row_max)
    return e / xp.where(s > 0, s, 1)[:, None]


def log_normaliser(xp: ModuleType, x: Any, row_max: Any) -> tuple[Any, Any, Any]:
    """``(e, s, ln s)`` with ``ln s`` accurate even when ``s`` rounds to 1.

    ``s = k + rest`` (k tokens at the max contribute exactly 1 each), so
    ``ln s = ln k + log1p(rest / k)`` keeps the tail mass that ``log(float32(s))`` would lose.
    """
    e, _ = exp_shifted(xp, x, row_max)
    at_max = x == row_max[:, None]
    k = at_max.sum(axis=1).astype(xp.float32)
    rest = xp.where(at_max, xp.float32(0), e).sum(axis=1)
    with quiet():  # k == 0 only for an all -inf row
        return e, k + rest, xp.log(k) + xp.log1p(rest / k)


def entropy_from_logits(xp: ModuleType, x: Any, row_max: Any) -> tuple[Any, Any, Any]:
    """``(H, s, ln s)`` per row, ``H = -sum p ln p = ln s + sum_i e_i (max - l_i) / s``.

    Both terms are non-negative, so nothing cancels; ``-sum p * log(p)`` on float32
    probabilities loses the top token's ``-p ln p`` entirely once its p rounds to 1.
    """
    e, s, log_s = log_normaliser(xp, x, row_max)
    with quiet():
        gap = xp.where(e > 0, (row_max[:, None] - x) * e, xp.float32(0)).sum(axis=1)
        return log_s + gap / s, s, log_s


def softmax(logits: Any) -> Any:
    """Probabilities ``[B, V]`` float32; -inf logits get probability 0.

    A row whose logits are all -inf comes back all zeros.
    """
    xp, x, row_max = as_logits(logits)
    return row_softmax(xp, x, row_max)
