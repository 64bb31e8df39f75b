"""Hugging Face transformers' warpers as an engine: the installed package's own
``TopPLogitsWarper``, ``MinPLogitsWarper`` and ``TemperatureLogitsWarper`` called on float32
torch tensors, one row at a time (each row has its own parameters), behind gpu_impl's API.

What HF computes, and why each is a legal answer the judge must accept:

- top_p: an *ascending* ``torch.sort``, ``softmax().cumsum()`` from the least probable token, and
  every token whose cumulative mass is ``<= 1 - p`` dropped, the last ``min_keep`` kept. Among
  tied tokens at the cut it keeps the highest ids (the ascending sort puts them last); at p = 1 it
  drops the tokens whose float32 probability underflows to exactly 0 (their cumulative mass is 0).
- min_p: ``probs < min_p · max(probs)`` on float32 probabilities, ``min_keep`` restored by
  ``torch.topk(probs, k)``: among tokens of equal (e.g. zero) probability, whichever topk returns.
- temperature: ``scores / t``; greedy: ``torch.argmax``, the first maximum.

HF validates its parameters where gpu_impl's API defines more (p > 1, p < 0 switch a filter off
or keep only ``min_keep``): the warper is built in HF's range and its threshold set afterwards,
so the arithmetic is still the library's. Where the API's rule is not HF's the function is not
replaced: top_k (HF keeps every token tied with the k-th, more than k), typical (HF keeps every
token whose score ties the cut's, and stops at ``cum >= mass`` where the spec has ``>``).
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch
from transformers import MinPLogitsWarper, TemperatureLogitsWarper, TopPLogitsWarper

from gpu_impl._array import as_logits, row_param
from properties.zoo.conforming._samplers import Choices, filter_args
from properties.zoo.conforming._torch import softmax

NO_IDS = torch.zeros((1, 0), dtype=torch.long)  # the warpers ignore input_ids


def _row(x: np.ndarray, b: int) -> torch.Tensor:
    return torch.from_numpy(np.ascontiguousarray(x[b:b + 1], dtype=np.float32))


def _by_row(x: np.ndarray, active: np.ndarray, warp: Callable[[int], Any]) -> np.ndarray:
    """Each active row through its own warper; rows with no finite logit come back as given (HF's
    softmax of an all -inf row is NaN: there is nothing to filter)."""
    out = x.copy()
    for b in np.flatnonzero(active & np.isfinite(x).any(axis=1)):
        out[b] = warp(int(b))(NO_IDS, _row(x, int(b)))[0].numpy()
    return out


def top_p(logits: Any, p: Any, min_keep: Any = 0) -> np.ndarray:
    x, _, p32, mk = filter_args(logits, p, min_keep, Choices())

    def warp(b: int) -> TopPLogitsWarper:
        w = TopPLogitsWarper(0.5, min_tokens_to_keep=max(1, int(mk[b])))
        w.top_p = float(p32[b])  # p >= 1: 1 - p <= 0 drops only zeros; p <= 0 keeps min_keep
        return w
    return _by_row(x, np.ones(x.shape[0], dtype=bool), warp)


def min_p(logits: Any, p: Any, min_keep: Any = 0) -> np.ndarray:
    x, _, p32, mk = filter_args(logits, p, min_keep, Choices())

    def warp(b: int) -> MinPLogitsWarper:
        w = MinPLogitsWarper(0.5, min_tokens_to_keep=max(1, int(mk[b])))
        w.min_p = float(p32[b])  # p > 1: every token below the threshold, min_keep restored
        return w
    return _by_row(x, p32 > 0, warp)


def temp(logits: Any, t: Any) -> np.ndarray:
    _, x, _ = as_logits(logits)
    t32 = row_param(t, x.shape[0], "t", np)
    out = _by_row(x, t32 > 0, lambda b: TemperatureLogitsWarper(float(t32[b])))
    cold = np.flatnonzero(t32 <= 0)  # HF refuses t <= 0; generation then decodes greedily: argmax
    if cold.size:
        first = torch.argmax(torch.from_numpy(x[cold]), dim=1).numpy()
        keep = np.arange(x.shape[1])[None, :] == first[:, None]
        out[cold] = np.where(keep, x[cold], np.float32(-np.inf))
    return out


def greedy(logits: Any) -> np.ndarray:
    _, x, m = as_logits(logits)
    if bool((m == -np.inf).any()):
        raise ValueError(f"greedy: rows {np.flatnonzero(m == -np.inf).tolist()} have no finite logit to select")
    return torch.argmax(torch.from_numpy(x), dim=1).numpy().astype(np.int64)


SAMPLERS: dict[str, Callable] = {"softmax": softmax, "top_p": top_p, "min_p": min_p, "temp": temp, "greedy": greedy}
