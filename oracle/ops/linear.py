"""Matrix products and lookups: matmul, embedding, the QKV projection, output logits, argmax.

The oracle multiplies the inputs exactly as stored (fp16/bf16/fp32 widen exactly to float64);
what an engine adds is its fp32 accumulation, judged by the error model in the catalogue.

Decisions (the same in gpu_impl):
- matmul: a ``[M, K]`` times b ``[K, N]``; other ranks or a K mismatch are ValueErrors.
- embedding: ids an integer array of any shape, each in ``[0, V)``; table ``[V, d]``; the rows
  are multiplied by ``scale`` (Gemma: √d_model). An id outside the table is a ValueError.
- project_qkv: a fused weight ``[(Hq + 2·Hkv)·D, d_model]`` (rows: all q heads, then k, then v)
  applied to x ``[T, d_model]`` gives q ``[T, Hq, D]``, k and v ``[T, Hkv, D]``.
- output_logits: hidden ``[T, d]`` times the first ``n_vocab`` rows of ``w_out`` ``[V_pad, d]``
  (engines pad the vocabulary), then the final softcap when softcap > 0; ``[T, n_vocab]``.
- argmax: the first index of the maximum along the last axis; a row with a NaN, or with no
  finite value, is a ValueError (no token is a correct answer; the greedy sampler agrees).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from oracle.ops._checks import as64, as_int, finite_scalar, positive_int
from oracle.ops.activations import softcap as apply_softcap


def matmul(a: Any, b: Any) -> np.ndarray:
    a, b = as64(a, "a", 2), as64(b, "b", 2)
    if a.shape[1] != b.shape[0]:
        raise ValueError(f"matmul: a {a.shape} and b {b.shape} have different inner dimensions")
    return a @ b


def embedding(table: Any, ids: Any, scale: float = 1.0) -> np.ndarray:
    t = as64(table, "table", 2)
    i = as_int(ids, "ids")
    bad = (i < 0) | (i >= t.shape[0])
    if bad.any():
        raise ValueError(f"token id {int(i[bad].flat[0])} is outside the table of {t.shape[0]} rows")
    return t[i] * finite_scalar(scale, "scale")


def project_qkv(x: Any, w_qkv: Any, n_head: int, n_kv_head: int, head_dim: int
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    hq, hkv, d = positive_int(n_head, "n_head"), positive_int(n_kv_head, "n_kv_head"), positive_int(head_dim, "head_dim")
    if hq % hkv:
        raise ValueError(f"n_head={hq} is not divisible by n_kv_head={hkv}")
    a, w = as64(x, "x", 2), as64(w_qkv, "w_qkv", 2)
    rows = (hq + 2 * hkv) * d
    if w.shape != (rows, a.shape[1]):
        raise ValueError(f"w_qkv must have shape ({rows}, {a.shape[1]}) = ((n_head + 2·n_kv_head)·head_dim, "
                         f"d_model), got {w.shape}")
    y = a @ w.T
    q, k, v = np.split(y, [hq * d, (hq + hkv) * d], axis=1)
    t = a.shape[0]
    return q.reshape(t, hq, d), k.reshape(t, hkv, d), v.reshape(t, hkv, d)


def output_logits(hidden: Any, w_out: Any, n_vocab: int, softcap: float = 0.0) -> np.ndarray:
    h, w = as64(hidden, "hidden", 2), as64(w_out, "w_out", 2)
    n_vocab = positive_int(n_vocab, "n_vocab")
    if w.shape[1] != h.shape[1]:
        raise ValueError(f"w_out rows have {w.shape[1]} entries but hidden has {h.shape[1]}")
    if n_vocab > w.shape[0]:
        raise ValueError(f"n_vocab={n_vocab} exceeds the {w.shape[0]} rows of w_out")
    logits = h @ w[:n_vocab].T
    cap = finite_scalar(softcap, "softcap", lo=0.0)
    return apply_softcap(logits, cap) if cap > 0 else logits


def argmax(x: Any) -> np.ndarray:
    a = as64(x, "x")
    if a.ndim == 0 or a.shape[-1] == 0:
        raise ValueError(f"argmax needs a non-empty last axis, got shape {a.shape}")
    nan_rows = np.isnan(a).any(axis=-1)
    if nan_rows.any():
        raise ValueError(f"argmax: {int(nan_rows.sum())} row(s) contain NaN")
    if (a == -np.inf).all(axis=-1).any():
        raise ValueError("argmax: a row has no finite value (all -inf)")
    return np.argmax(a, axis=-1).astype(np.int64)
