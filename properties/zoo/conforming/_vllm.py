"""vLLM's sampler as an engine: its float32 torch arithmetic, batched with per-row parameter
tensors, behind gpu_impl's API (vLLM itself is not installed; this is written from the
arithmetic its sampler performs, not from its source).

- temperature: ``logits.div_(temp[:, None])`` with float32 temperatures; a temperature at or
  below 0 decodes greedily (``argmax``, the first maximum);
- top_p: one *ascending* sort, ``softmax`` of the sorted row, ``cumsum``, the mask
  ``cum <= 1 - p`` computed in float32, the last position always kept, then a scatter back; at
  p = 1 the tokens whose float32 probability underflows to 0 go, among tied tokens at the cut
  the highest ids stay;
- min_p: ``probs >= min_p · max(probs)`` on float32 probabilities;
- top_k: ``torch.topk(logits, k).indices`` (whichever tied tokens topk returns);
- greedy: ``argmax``.

vLLM has no ``min_keep``; the API's is honoured the way HF does it (the last ``min_keep``
positions of the ascending sort, ``torch.topk(probs, k)`` for min_p). vLLM's own top-k mask
(``logits < k-th value``) keeps every token tied with the k-th, more than the API's k: here the
topk indices are scattered instead, the one departure, so that the count is the API's.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch

from gpu_impl._array import as_logits, row_param
from properties.zoo.conforming._samplers import Choices, filter_args
from properties.zoo.conforming._torch import softmax

NEG_INF = float("-inf")


def _live(x: np.ndarray) -> np.ndarray:
    """Rows with a finite logit (softmax of an all -inf row is NaN: nothing to filter there)."""
    return np.isfinite(x).any(axis=1)


def top_p(logits: Any, p: Any, min_keep: Any = 0) -> np.ndarray:
    x, _, p32, mk = filter_args(logits, p, min_keep, Choices())
    xt = torch.from_numpy(x.copy())
    logits_sort, logits_idx = xt.sort(dim=-1, descending=False)
    probs_sum = torch.cumsum(logits_sort.softmax(dim=-1), dim=-1)
    mask = probs_sum <= 1 - torch.from_numpy(p32.astype(np.float32))[:, None]
    V = x.shape[1]
    keep_last = torch.arange(V)[None, :] >= V - torch.from_numpy(np.maximum(mk, 1))[:, None]
    logits_sort = logits_sort.masked_fill(mask & ~keep_last, NEG_INF)
    out = logits_sort.scatter(dim=-1, index=logits_idx, src=logits_sort).numpy()
    return np.where(_live(x)[:, None], out, x)


def min_p(logits: Any, p: Any, min_keep: Any = 0) -> np.ndarray:
    x, _, p32, mk = filter_args(logits, p, min_keep, Choices())
    xt = torch.from_numpy(x.copy())
    probs = xt.softmax(dim=-1)
    adjusted = torch.from_numpy(p32.astype(np.float32))[:, None] * probs.amax(dim=-1, keepdim=True)
    valid = probs >= adjusted
    k = int(min(max(1, int(mk.max())), x.shape[1]))
    top = torch.topk(probs, k, dim=-1).indices
    need = torch.arange(k)[None, :] < torch.from_numpy(np.minimum(np.maximum(mk, 1), x.shape[1]))[:, None]
    valid = valid.scatter(-1, top, valid.gather(-1, top) | need)
    out = xt.masked_fill(~valid, NEG_INF).numpy()
    return np.where((_live(x) & (p32 > 0))[:, None], out, x)


def top_k(logits: Any, k: Any) -> np.ndarray:
    _, x, _ = as_logits(logits)
    B, V = x.shape
    kk = row_param(k, B, "k", np, integer=True)
    on = (kk > 0) & (kk < V)
    if not on.any():
        return x.copy()
    xt = torch.from_numpy(x.copy())
    keep = torch.zeros(B, V, dtype=torch.bool)
    for k in np.unique(kk[on]):  # one topk per k: which tied tokens topk returns depends on k, and a
        rows = torch.from_numpy(np.flatnonzero(on & (kk == k)))  # row's answer may not depend on its batch
        keep[rows] = keep[rows].scatter(-1, torch.topk(xt[rows], int(k), dim=-1).indices, True)
    out = xt.masked_fill(~keep, NEG_INF).numpy()
    return np.where(on[:, None], out, x)


def temp(logits: Any, t: Any) -> np.ndarray:
    _, x, _ = as_logits(logits)
    t32 = row_param(t, x.shape[0], "t", np).astype(np.float32)
    xt = torch.from_numpy(x.copy())
    hot = torch.from_numpy(t32 > 0)
    out = xt.div(torch.where(hot, torch.from_numpy(t32), torch.ones(1))[:, None])
    first = xt.argmax(dim=-1)
    greedy_rows = torch.where(torch.arange(x.shape[1])[None, :] == first[:, None], xt, torch.tensor(NEG_INF))
    return torch.where(hot[:, None], out, greedy_rows).numpy()


def greedy(logits: Any) -> np.ndarray:
    _, x, m = as_logits(logits)
    if bool((m == -np.inf).any()):
        raise ValueError(f"greedy: rows {np.flatnonzero(m == -np.inf).tolist()} have no finite logit to select")
    return torch.from_numpy(x).argmax(dim=-1).numpy().astype(np.int64)


SAMPLERS: dict[str, Callable] = {"softmax": softmax, "top_p": top_p, "min_p": min_p, "top_k": top_k, "temp": temp,
                                 "greedy": greedy}
