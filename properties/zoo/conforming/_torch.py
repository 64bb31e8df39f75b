"""PyTorch (CPU, float32) as an engine: the samplers written the way Hugging Face writes its
warpers (``torch.softmax``, ``torch.sort``, ``torch.cumsum``, ``log_softmax`` for the entropy,
``p >= p_min · p_max`` for min_p), with llama.cpp's boundary rules and gpu_impl's API; the ops
from ``torch.nn.functional``. Whatever order torch's kernels reduce in is the point: it is a
correct engine the judge must accept.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
import torch
import torch.nn.functional as F

from gpu_impl._array import as_logits, unit_param
from gpu_impl.ops._xp import quiet, scalar
from gpu_impl.ops.attention import _inputs
from gpu_impl.ops.norms import _setup
from gpu_impl.ops.softmax import _logits
from properties.zoo.conforming._ops import make_matmul
from properties.zoo.conforming._samplers import Choices, filter_args

NEG_INF = np.float32(-np.inf)


def _t(a: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(a, dtype=np.float32))


def _probs(x: torch.Tensor) -> torch.Tensor:
    """Row softmax; a row with no finite logit has no distribution: zeros (torch gives NaN)."""
    p = torch.softmax(x, dim=-1)
    return torch.where(torch.isfinite(x).any(dim=-1, keepdim=True), p, torch.zeros_like(p))


def _keep_sorted_prefix(x: torch.Tensor, order: torch.Tensor, n: torch.Tensor) -> np.ndarray:
    ranked = torch.arange(x.shape[1])[None, :] < n[:, None]
    keep = torch.zeros_like(ranked).scatter(1, order, ranked)
    return torch.where(keep, x, torch.tensor(-math.inf)).numpy()


def _first(hit: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return hit.to(torch.uint8).argmax(dim=1), hit.any(dim=1)


def softmax(logits: Any) -> np.ndarray:
    _, x, _ = as_logits(logits)
    return _probs(_t(x)).numpy()


def top_p(logits: Any, p: Any, min_keep: Any = 0) -> np.ndarray:
    x, _, p32, mk = filter_args(logits, p, min_keep, Choices())
    V = x.shape[1]
    if not (p32 < 1).any():
        return x.copy()
    xt = _t(x)
    sorted_x, order = torch.sort(xt, dim=1, descending=True, stable=True)
    cum = torch.cumsum(_probs(xt).gather(1, order), dim=1)
    pos = torch.arange(1, V + 1)[None, :]
    i, found = _first((cum >= torch.from_numpy(p32)[:, None]) & (pos >= torch.from_numpy(mk)[:, None]))
    out = _keep_sorted_prefix(xt, order, torch.where(found, i + 1, V))
    return np.where((p32 < 1)[:, None], out, x)


def typical(logits: Any, p: Any, min_keep: Any = 0) -> np.ndarray:
    x, _, p32, mk = filter_args(logits, p, min_keep, Choices())
    V = x.shape[1]
    if not (p32 < 1).any():
        return x.copy()
    xt = _t(x)
    logp = torch.log_softmax(xt, dim=-1)
    probs = logp.exp()
    ent = -(torch.where(probs > 0, logp * probs, torch.zeros_like(probs))).sum(-1, keepdim=True)
    score = torch.where(probs > 0, (-logp - ent).abs(), torch.tensor(math.inf))
    # ascending score; equal scores: descending logit, then lower id (two stable sorts)
    by_logit = torch.sort(xt, dim=1, descending=True, stable=True).indices
    order = by_logit.gather(1, torch.sort(score.gather(1, by_logit), dim=1, stable=True).indices)
    cum = torch.cumsum(probs.gather(1, order), dim=1)
    pos = torch.arange(V)[None, :]
    need = torch.from_numpy(np.maximum(mk, 1))[:, None] - 1
    i, found = _first((cum > torch.from_numpy(p32)[:, None]) & (pos >= need))
    out = _keep_sorted_prefix(xt, order, torch.where(found, i + 1, V))
    return np.where((p32 < 1)[:, None], out, x)


def min_p(logits: Any, p: Any, min_keep: Any = 0) -> np.ndarray:
    x, _, p32, mk = filter_args(logits, p, min_keep, Choices())
    V = x.shape[1]
    xt = _t(x)
    probs = _probs(xt)
    keep = (probs >= torch.from_numpy(p32)[:, None] * probs.max(dim=1, keepdim=True).values) & torch.isfinite(xt)
    need = torch.from_numpy(np.minimum(np.maximum(mk, 1), V))
    order = torch.sort(xt, dim=1, descending=True, stable=True).indices
    fallback = _keep_sorted_prefix(xt, order, need)
    short = (keep.sum(dim=1) < need).numpy()
    out = np.where(short[:, None], fallback, np.where(keep.numpy(), x, NEG_INF))
    return np.where((p32 > 0)[:, None], out, x)


def dist(logits: Any, u: Any) -> np.ndarray:
    _, x, m = as_logits(logits)
    if bool((m == -np.inf).any()):
        raise ValueError(f"dist: rows {np.flatnonzero(m == -np.inf).tolist()} have no finite logit to select")
    u64 = unit_param(u, x.shape[0], "u", np)
    probs = _probs(_t(x))
    cdf = torch.cumsum(probs, dim=1).double()
    i, found = _first((cdf >= torch.from_numpy(u64)[:, None]) & (probs > 0))
    last = torch.where(probs > 0, torch.arange(x.shape[1]), -1).max(dim=1).values
    return torch.where(found, i, last).numpy().astype(np.int64)


SAMPLERS: dict[str, Callable] = {"softmax": softmax, "top_p": top_p, "typical": typical, "min_p": min_p,
                                 "dist": dist}


# --- ops ------------------------------------------------------------------------------------------

def op_softmax(x: Any, axis: int = -1, scale: float = 1.0, mask: Any = None) -> np.ndarray:
    _, z, axis = _logits(x, axis, scale, mask)
    with quiet():
        out = torch.softmax(_t(z), dim=axis).numpy()
    return np.where(np.isfinite(z.max(axis=axis, keepdims=True)), out, np.float32(np.nan))


def op_log_softmax(x: Any, axis: int = -1, scale: float = 1.0, mask: Any = None) -> np.ndarray:
    _, z, axis = _logits(x, axis, scale, mask)
    with quiet():
        out = torch.log_softmax(_t(z), dim=axis).numpy()
    return np.where(np.isfinite(z.max(axis=axis, keepdims=True)), out, np.float32(np.nan))


def rms_norm(x: Any, weight: Any = None, eps: float = 1e-6, unit_offset: bool = False) -> np.ndarray:
    _, a, e, aff = _setup(x, eps, {"weight": weight})
    w = aff["weight"]
    w = None if w is None and not unit_offset else _t((np.ones(a.shape[-1], np.float32) if w is None else w)
                                                        + np.float32(unit_offset))
    return F.rms_norm(_t(a), (a.shape[-1],), w, eps=e).numpy()


def layer_norm(x: Any, weight: Any = None, bias: Any = None, eps: float = 1e-5) -> np.ndarray:
    _, a, e, aff = _setup(x, eps, {"weight": weight, "bias": bias})
    w, b = (None if aff[k] is None else _t(aff[k]) for k in ("weight", "bias"))
    return F.layer_norm(_t(a), (a.shape[-1],), w, b, eps=e).numpy()


matmul = make_matmul(lambda a, b: torch.matmul(_t(a), _t(b)).numpy())


def attention(q: Any, k: Any, v: Any, q_pos: Any, k_pos: Any, *, scale: float | None = None,
              causal: bool = True, window: int = 0, softcap: float = 0.0) -> np.ndarray:
    """Scores by ``matmul``, softcap by ``tanh``, ``masked_fill`` of invisible keys, softmax, ·V
    (the eager path every PyTorch model writes), heads grouped by ``repeat_interleave``."""
    _, q32, k32, v32, qp, kp = _inputs(q, k, v, q_pos, k_pos)
    sc = 1.0 / math.sqrt(q32.shape[2]) if scale is None else scalar(scale, "scale", above=0.0)
    if int(window) != window or window < 0:
        raise ValueError(f"window must be a non-negative integer, got {window!r}")
    cap = scalar(softcap, "softcap", at_least=0.0)
    gap = torch.from_numpy(qp[:, None] - kp[None, :])
    seen = gap >= 0 if causal else torch.ones(gap.shape, dtype=torch.bool)
    if window:
        seen = seen & (gap.abs() < int(window))
    if not bool(seen.any(dim=1).all()):
        t = int(torch.nonzero(~seen.any(dim=1))[0, 0])
        raise ValueError(f"query {t} at position {int(qp[t])} sees no key (causal={causal}, window={window})")
    g = q32.shape[1] // k32.shape[1]
    qt = _t(q32).transpose(0, 1)  # [H, Tq, D]
    kt = _t(k32).repeat_interleave(g, dim=1).transpose(0, 1)
    vt = _t(v32).repeat_interleave(g, dim=1).transpose(0, 1)
    s = torch.matmul(qt, kt.transpose(1, 2)) * sc
    if cap > 0:
        s = cap * torch.tanh(s / cap)
    p = torch.softmax(s.masked_fill(~seen[None], -math.inf), dim=-1)
    bad = ~torch.isfinite(vt)  # zeroed for the product, so invisible cells cannot change its arithmetic
    out = torch.matmul(p, torch.where(bad, 0.0, vt))
    reached = torch.einsum("tj,hjd->htd", seen.float(), bad.float()) > 0  # a visible NaN/inf value
    out = torch.where(reached, math.nan, out)
    return out.transpose(0, 1).numpy()


OPS: dict[str, Callable] = {"softmax": op_softmax, "log_softmax": op_log_softmax, "rms_norm": rms_norm,
                            "layer_norm": layer_norm, "matmul": matmul, "attention": attention}
