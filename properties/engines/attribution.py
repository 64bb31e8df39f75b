"""Attribution: when an engine's chain row is not a legal result of llama.cpp's chain, which known
mistake explains it. The candidates are the chain with one stage moved (every reordering of two
adjacent stages is one: "min_p before top_p"; temperature run first is "temp before top_k") and
the hand-off mistakes (a stage fed the raw row again, top_p on a stale softmax, a normaliser
over a window of the 1,000 largest weights). Each is run in float64 on the case's row; one
explains the engine's row when it keeps exactly the engine's tokens, modulo ties (the engine's
row is compared after the same canonical relabelling as the judgement,
``chains_whole.canonical_row``). The words are a diagnosis appended to the failure, never a
verdict: the verdict is ``chains_whole.violation``'s.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from properties.engines.chains_whole import STAGES, ChainParams, canonical_row, post_penalty_ties, stage_row

WINDOW = 1000  # the windowed normaliser's width, as engines that "only need the top 1,000" use


def _stage(name: str, x: np.ndarray, cp: ChainParams) -> np.ndarray:
    return stage_row(name, x, cp.stage(name))


def _in_order(stages: tuple[str, ...]) -> Callable[[np.ndarray, ChainParams], np.ndarray]:
    def run(row: np.ndarray, cp: ChainParams) -> np.ndarray:
        for s in stages:
            row = _stage(s, row, cp)
        return row
    return run


def _cut_on(weights: Callable[[np.ndarray, np.ndarray], np.ndarray], p: float, raw: np.ndarray,
            x: np.ndarray) -> np.ndarray:
    """top_p's prefix cut on ``x``'s survivors in descending order, accumulating ``weights``."""
    if p >= 1 or not np.isfinite(x).any():
        return x
    order = np.argsort(-x, kind="stable")
    order = order[np.isfinite(x[order])]
    cum = np.cumsum(weights(raw, x)[order])
    hit = np.flatnonzero(cum >= p)
    out = x.copy()
    out[order[(int(hit[0]) + 1 if hit.size else order.size):]] = -np.inf
    return out


def _softmax(x: np.ndarray, over: np.ndarray | None = None) -> np.ndarray:
    fin = np.isfinite(x)
    e = np.where(fin, np.exp(np.where(fin, x, 0) - x[fin].max()), 0.0)
    return e / (e.sum() if over is None else e[over].sum())


def _window_weights(raw: np.ndarray, x: np.ndarray) -> np.ndarray:
    top = np.argsort(-x, kind="stable")[:WINDOW]
    return _softmax(x, top[np.isfinite(x[top])])


def _top_p_with(weights: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Callable[[np.ndarray, ChainParams], np.ndarray]:
    def run(row: np.ndarray, cp: ChainParams) -> np.ndarray:
        x = _cut_on(weights, cp.p, row, _stage("top_k", _stage("penalties", row, cp), cp))
        return _stage("temp", _stage("min_p", x, cp), cp)
    return run


def _fed_raw(stage: str) -> Callable[[np.ndarray, ChainParams], np.ndarray]:
    """The chain with ``stage``'s cut taken on the model's row instead of its own input."""
    def run(row: np.ndarray, cp: ChainParams) -> np.ndarray:
        x = row
        for s in STAGES:
            x = np.where(np.isfinite(_stage(s, row, cp)), x, -np.inf) if s == stage else _stage(s, x, cp)
        return x
    return run


@dataclass(frozen=True)
class Mistake:
    says: str
    """How the failure names it: "behaves like <says>"."""
    run: Callable[[np.ndarray, ChainParams], np.ndarray]
    """(row float64, parameters) -> the final row of a chain with this mistake."""


def _moves() -> list[Mistake]:
    """Every order with one stage moved, adjacent swaps first, then by distance moved; a stage
    moved earlier is named before the same order seen as another moved later."""
    seen, out = {STAGES}, []
    for dist in range(1, len(STAGES)):
        for sign in (-1, 1):
            for i, s in enumerate(STAGES):
                j = i + sign * dist
                if not 0 <= j < len(STAGES):
                    continue
                rest = [x for x in STAGES if x != s]
                order = tuple(rest[:j] + [s] + rest[j:])
                if order in seen:
                    continue
                seen.add(order)
                says = f"{s} before {order[j + 1]}" if j < i else f"{s} after {order[j - 1]}"
                out.append(Mistake(says, _in_order(order)))
    return out


MOVES: tuple[Mistake, ...] = tuple(_moves())
HANDOFFS: tuple[Mistake, ...] = (
    Mistake("top_p fed the raw row (not the penalised top-k survivors)", _fed_raw("top_p")),
    Mistake("min_p fed the raw row (not the penalised survivors)", _fed_raw("min_p")),
    Mistake("top_k fed the raw row (not the penalised one)", _fed_raw("top_k")),
    Mistake("top_p on a stale softmax (the probabilities of the row before penalties and top_k)",
            _top_p_with(lambda raw, x: _softmax(raw))),
    Mistake(f"top_p normalised over the {WINDOW:,} largest weights only", _top_p_with(_window_weights)),
)
MISTAKES: tuple[Mistake, ...] = (*MOVES, *HANDOFFS)
TEMP_FIRST = next(m for m in MOVES if m.says == "temp before top_k")
TARGETS: tuple[Mistake, ...] = (*MOVES[:len(STAGES) - 1], TEMP_FIRST, *HANDOFFS)
"""What the chain-case draw aims at: every adjacent swap, temperature first, every hand-off."""
WINDOWED = HANDOFFS[-1]
CORRECT = _in_order(STAGES)


def explaining(out: np.ndarray, row64: np.ndarray, cp: ChainParams) -> list[str]:
    """The mistakes whose chain keeps exactly the engine's tokens (modulo ties), in search order."""
    kept = np.isfinite(canonical_row(np.asarray(out), post_penalty_ties(_stage("penalties", row64, cp))))
    found = []
    for mk in MISTAKES:
        if np.array_equal(np.isfinite(mk.run(row64, cp)), kept):
            found.append(mk.says)
    return found


def explain(out: np.ndarray, row64: np.ndarray, cp: ChainParams) -> str:
    """The diagnosis appended to a chain failure ("" when no known mistake explains the row)."""
    found = explaining(out, row64, cp)
    if not found:
        return "; no single stage moved and no known hand-off mistake explains the engine's row"
    also = f" (equally: {', '.join(found[1:])})" if len(found) > 1 else ""
    return f"; behaves like {found[0]}{also}"
