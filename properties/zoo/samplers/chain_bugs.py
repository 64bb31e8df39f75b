"""The chain zoo: llama.cpp's default chain (penalties -> top_k -> top_p -> min_p -> temp) with
one order or hand-off bug each, built from the implementation's own samplers so that everything
but the bug is a correct float32 engine. Each is a replacement for ``engines.llama_cpp_chain``
(same signature); ``CHAIN_MUTANTS`` lists them with what they get wrong.

Two kinds of bug, as engine authors make them:

- an order bug: two adjacent stages swapped, or temperature run first (the founding
  ``temp_misplaced``);
- a hand-off bug: what one stage hands the next is wrong although every stage is right on its
  input: top_p fed the raw row again (the model's logits, not the penalised top-k survivors),
  top_p trusting the probabilities of the softmax taken before penalties and top_k (stale: not
  renormalised over the survivors), or a normaliser summed over a window of the 1,000 largest
  weights only (visible when more than 1,000 tokens reach top_p).
"""
from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable

import numpy as np

WINDOW = 1000  # the windowed normaliser's width: a common "top 1,000 is enough" shortcut

ChainFn = Callable[..., Any]


@dataclass(frozen=True)
class ChainMutant:
    name: str
    description: str
    build: Callable[[ModuleType], ChainFn]
    """gpu_impl (or a module with its API) -> the buggy ``llama_cpp_chain``."""
    says: tuple[str, ...]
    """The beginnings of the attributions that name this bug (``properties.engines.attribution``);
    a chain order may have several names: temperature first also reads "temp before top_p" where
    top_k, which commutes with temperature, cannot tell."""


def _order(*stages: str) -> Callable[[ModuleType], ChainFn]:
    """The chain with its five stages run in ``stages``' order."""
    def build(base: ModuleType) -> ChainFn:
        def chain(logits, history, last_n, repeat, freq, present, k, p, m, t):
            run = {"penalties": lambda x: base.penalties(x, history, last_n, repeat, freq, present),
                   "top_k": lambda x: base.top_k(x, k), "top_p": lambda x: base.top_p(x, p, 0),
                   "min_p": lambda x: base.min_p(x, m, 0), "temp": lambda x: base.temp(x, t)}
            x = logits
            for s in stages:
                x = run[s](x)
            return x
        return chain
    return build


def _per_row(v: Any, B: int, dtype: type) -> np.ndarray:
    return np.broadcast_to(np.asarray(v, dtype=dtype).reshape(-1), (B,))


def _top_p_with(weights: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[[ModuleType], ChainFn]:
    """The correct order with top_p cutting on ``weights(raw_row, row)`` (float32 per token)
    accumulated in the row's descending order instead of the row's own fresh softmax."""
    def build(base: ModuleType) -> ChainFn:
        def chain(logits, history, last_n, repeat, freq, present, k, p, m, t):
            raw = np.asarray(logits, dtype=np.float32)
            x = np.array(base.top_k(base.penalties(logits, history, last_n, repeat, freq, present), k), dtype=np.float32)
            pp = _per_row(p, x.shape[0], np.float32)
            for b in range(x.shape[0]):
                if pp[b] >= 1 or not np.isfinite(x[b]).any():
                    continue
                order = np.argsort(-x[b], kind="stable")
                order = order[np.isfinite(x[b][order])]
                cum = np.cumsum(weights(raw[b], x[b])[order], dtype=np.float32)
                hit = np.flatnonzero(cum >= pp[b])
                n = int(hit[0]) + 1 if hit.size else order.size
                x[b, order[n:]] = -np.inf
            return base.temp(base.min_p(x, m, 0), t)
        return chain
    return build


def _softmax32(x: np.ndarray, over: np.ndarray | None = None) -> np.ndarray:
    fin = np.isfinite(x)
    e = np.exp((np.where(fin, x, x[fin].max()) - x[fin].max()).astype(np.float32))
    e[~fin] = 0
    return (e / (e.sum(dtype=np.float32) if over is None else e[over].sum(dtype=np.float32))).astype(np.float32)


def _stale(raw: np.ndarray, x: np.ndarray) -> np.ndarray:
    return _softmax32(raw)  # the bug: the raw row's softmax, before penalties and top_k


def _windowed(raw: np.ndarray, x: np.ndarray) -> np.ndarray:
    top = np.argsort(-x, kind="stable")[:WINDOW]
    return _softmax32(x, over=top[np.isfinite(x[top])])  # the bug: Z over the 1,000 largest only


def _top_p_fed_raw(base: ModuleType) -> ChainFn:
    def chain(logits, history, last_n, repeat, freq, present, k, p, m, t):
        x = base.top_k(base.penalties(logits, history, last_n, repeat, freq, present), k)
        cut = np.isfinite(np.asarray(base.top_p(logits, p, 0)))  # the bug: top_p sees the model's row again
        x = np.where(cut, np.asarray(x), np.float32(-np.inf)).astype(np.float32)
        return base.temp(base.min_p(x, m, 0), t)
    return chain


def _min_p_fed_raw(base: ModuleType) -> ChainFn:
    def chain(logits, history, last_n, repeat, freq, present, k, p, m, t):
        x = base.top_p(base.top_k(base.penalties(logits, history, last_n, repeat, freq, present), k), p, 0)
        cut = np.isfinite(np.asarray(base.min_p(logits, m, 0)))  # the bug: min_p sees the unpenalised row
        x = np.where(cut, np.asarray(x), np.float32(-np.inf)).astype(np.float32)
        return base.temp(x, t)
    return chain


CHAIN_MUTANTS: tuple[ChainMutant, ...] = (
    ChainMutant("top_k_before_penalties", "top_k runs before penalties: it ranks the unpenalised logits",
                _order("top_k", "penalties", "top_p", "min_p", "temp"), ("top_k before penalties",)),
    ChainMutant("top_p_before_top_k", "top_p runs before top_k: it does not renormalise over the k survivors",
                _order("penalties", "top_p", "top_k", "min_p", "temp"), ("top_p before top_k",)),
    ChainMutant("min_p_before_top_p", "min_p runs before top_p: top_p renormalises over min_p's survivors",
                _order("penalties", "top_k", "min_p", "top_p", "temp"), ("min_p before top_p",)),
    ChainMutant("temp_before_min_p", "temperature runs before min_p: the threshold moves to max + t·ln m",
                _order("penalties", "top_k", "top_p", "temp", "min_p"), ("temp before min_p",)),
    ChainMutant("temp_misplaced", "temperature runs first, before top_k, top_p and min_p (founding bug)",
                _order("penalties", "temp", "top_k", "top_p", "min_p"),
                ("temp before top_k", "temp before top_p", "temp before min_p")),
    ChainMutant("top_p_fed_raw_row", "top_p cuts on the model's raw row, not on the penalised top-k survivors",
                _top_p_fed_raw, ("top_p fed the raw row",)),
    ChainMutant("min_p_fed_raw_row", "min_p cuts on the model's raw row, not on the penalised survivors",
                _min_p_fed_raw, ("min_p fed the raw row", "min_p before penalties")),
    ChainMutant("top_p_stale_softmax", "top_p accumulates the probabilities of the softmax taken before penalties "
                "and top_k, not renormalised over the survivors (founding bug)", _top_p_with(_stale), ("top_p on a stale softmax",)),
    ChainMutant("top_p_window_1000", "top_p's softmax is normalised over the 1,000 largest weights only",
                _top_p_with(_windowed), ("top_p normalised over",)),
)
CHAIN_MUTANTS_BY_NAME = {m.name: m for m in CHAIN_MUTANTS}
