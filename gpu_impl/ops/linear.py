"""Products and lookups in float32: fp16/bf16 operands are widened exactly and accumulated in
fp32 by the backend's GEMM. Refusals as in the oracle (see gpu_impl.ops)."""
from __future__ import annotations

from typing import Any

from gpu_impl.ops._xp import array_module, count, f32, ints, ndim, scalar


def matmul(a: Any, b: Any) -> Any:
    xp = array_module(a, b)
    a32, b32 = f32(xp, a, "a"), f32(xp, b, "b")
    ndim(a32, 2, "a")
    ndim(b32, 2, "b")
    if a32.shape[1] != b32.shape[0]:
        raise ValueError(f"matmul: a {tuple(a32.shape)} and b {tuple(b32.shape)} have different inner dimensions")
    return a32 @ b32


def embedding(table: Any, ids: Any, scale: float = 1.0) -> Any:
    xp = array_module(table)
    ndim(table, 2, "table")
    i = ints(xp, ids, "ids")
    out_of_range = (i < 0) | (i >= table.shape[0])
    if bool(out_of_range.any()):
        bad = int(i[out_of_range].ravel()[0])
        raise ValueError(f"token id {bad} is outside the table of {table.shape[0]} rows")
    rows = f32(xp, table[i], "table")  # widen only the rows looked up
    s = scalar(scale, "scale")
    return rows * xp.float32(s) if s != 1.0 else rows.copy()


def project_qkv(x: Any, w_qkv: Any, n_head: int, n_kv_head: int, head_dim: int) -> tuple[Any, Any, Any]:
    hq, hkv, d = count(n_head, "n_head"), count(n_kv_head, "n_kv_head"), count(head_dim, "head_dim")
    if hq % hkv:
        raise ValueError(f"n_head={hq} is not divisible by n_kv_head={hkv}")
    xp = array_module(x, w_qkv)
    a, w = f32(xp, x, "x"), f32(xp, w_qkv, "w_qkv")
    ndim(a, 2, "x")
    want = ((hq + 2 * hkv) * d, a.shape[1])
    if tuple(w.shape) != want:
        raise ValueError(f"w_qkv must have shape {want} = ((n_head + 2·n_kv_head)·head_dim, d_model), "
                         f"got {tuple(w.shape)}")
    y = a @ w.T
    n, q_end, k_end = a.shape[0], hq * d, (hq + hkv) * d
    return (y[:, :q_end].reshape(n, hq, d), y[:, q_end:k_end].reshape(n, hkv, d),
            y[:, k_end:].reshape(n, hkv, d))


def output_logits(hidden: Any, w_out: Any, n_vocab: int, softcap: float = 0.0) -> Any:
    xp = array_module(hidden, w_out)
    h, w = f32(xp, hidden, "hidden"), f32(xp, w_out, "w_out")
    ndim(h, 2, "hidden")
    ndim(w, 2, "w_out")
    v = count(n_vocab, "n_vocab")
    if w.shape[1] != h.shape[1]:
        raise ValueError(f"w_out rows have {w.shape[1]} entries but hidden has {h.shape[1]}")
    if v > w.shape[0]:
        raise ValueError(f"n_vocab={v} exceeds the {w.shape[0]} rows of w_out")
    logits = h @ w[:v].T  # padded vocabulary rows are never computed
    cap = scalar(softcap, "softcap", at_least=0.0)
    if cap > 0:
        c = xp.float32(cap)
        logits = c * xp.tanh(logits / c)
    return logits


def argmax(x: Any) -> Any:
    xp = array_module(x)
    a = f32(xp, x, "x")
    if a.ndim == 0 or a.shape[-1] == 0:
        raise ValueError(f"argmax needs a non-empty last axis, got shape {tuple(a.shape)}")
    top = a.max(axis=-1)  # NaN propagates, so one reduction finds both refusals
    if bool(xp.isnan(top).any()):
        raise ValueError(f"argmax: {int(xp.isnan(top).sum())} row(s) contain NaN")
    if bool((top == -xp.inf).any()):
        raise ValueError("argmax: a row has no finite value (all -inf)")
    return xp.argmax(a, axis=-1).astype(xp.int64)  # first maximal index, as NumPy and CuPy define it
