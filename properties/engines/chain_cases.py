"""Cases for llama.cpp's whole chain (penalties -> top_k -> top_p -> min_p -> temp) and the one
judgement of an engine's chain on a case (``judge``), shared by ``test_chains.py`` and the chain
zoo (``properties/zoo/test_chain_mutants.py``).

Two draws. ``broad_chain_cases`` is any sampler case (every family, vocabularies up to 4,096)
with parameters from short lists: most of its cases cannot tell one stage order from another
(top_k = 1, p = 1, a one-token row, a temperature of 1), so order and hand-off bugs were killed by
pinned corners, not by draws. ``interacting_chain_cases`` aims each case at one known mistake
(``attribution.TARGETS``: each adjacent swap, temperature first, each hand-off) and draws the
row, then each stage's parameter *from the row the correct chain hands that stage*:

- the history holds tokens ranked next to the cut rank (and sometimes the maximum), so the
  penalties move tokens across top_k's and min_p's cuts;
- k is the cut rank (or a little more), so top_k drops tokens;
- p lies halfway between two cumulative masses of top_k's renormalised survivors, and m halfway
  (in logits) between two of top_p's survivors, so both cut, never within rounding of a mass or
  a logit (a legal engine's float32 cannot land on the other side);
- t is far from 1 (1/4 to 4), so a temperature before a cut moves it;
- sometimes the stages after top_k or top_p stay off (a later cut can drop exactly the tokens
  where two orders differ);
- the windowed normaliser's cases have 2,048 to 4,097 tokens, top_k off and top_p keeping up to
  900 of them; it is aimed at twice as often, being the only mistake no small row shows.

The parameters are redrawn (up to 12 times) until the aimed-at mistake's float64 chain keeps
other tokens than the correct chain. ``chain_cases`` draws interacting cases four times in five
and broad ones otherwise (every family and the rows with huge or -inf logits stay judged).
Measured separation rates per mutant are in docs/judge.md#chains.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from hypothesis import example, settings, strategies as st

from properties.engines.attribution import CORRECT, TARGETS, WINDOWED, explain
from properties.engines.chains_whole import ChainParams, stage_row, violation
from properties.samplers.strategies import Case, cases

NONE = np.zeros(0, dtype=np.int64)


def drawn_budget() -> int:
    """Drawn examples of the whole-chain test: chain cases are cheap (at most 4,096 tokens, one
    row), and the budget is what kills the order and hand-off bugs from draws at ci (the
    per-case separation rates are in docs/judge.md#chains): 200 at ci, 500 nightly; a profile
    of fewer than 10 examples (smoke: does the test judge at all?) keeps its own count."""
    n = settings.default.max_examples
    return n if n < 10 else max(200, 2 * n)


_WINDOW_VOCABS = (2048, 4096, 4097)
_VOCABS = (8, 17, 33, 64, 100, 257, 1000)
_FAMILIES = ("zipf", "peaked", "flat", "plateaus", "near_ties", "neg_inf")
_TEMPS = (0.25, 0.5, 0.7, 1.5, 2.0, 4.0)


@dataclass(frozen=True)
class ChainCase:
    """One row (a samplers ``Case``: its repr rebuilds the logits) and the chain's parameters."""
    logits: Case
    chain: ChainParams

    @property
    def row(self) -> np.ndarray:
        return self.logits.logits[0].astype(np.float32)


@st.composite
def chain_params(draw: st.DrawFn, vocab: int) -> ChainParams:
    """The broad draw's parameters: short lists, independent of the row."""
    h = draw(st.integers(0, 8), label="history length")
    history = np.asarray(draw(st.lists(st.integers(-1, vocab - 1), min_size=h, max_size=h), label="history"),
                         dtype=np.int64)
    return ChainParams(history=history, last_n=draw(st.sampled_from([0, 8, 64]), label="last_n"),
                       repeat=draw(st.sampled_from([1.0, 1.1, 1.5]), label="repeat"),
                       freq=draw(st.sampled_from([0.0, 0.5]), label="freq"),
                       present=draw(st.sampled_from([0.0, 0.25]), label="present"),
                       k=draw(st.sampled_from([0, 1, 5, 40, vocab]), label="k"),
                       p=draw(st.sampled_from([1.0, 0.95, 0.8, 0.5]), label="p"),
                       m=draw(st.sampled_from([0.0, 0.05, 0.2]), label="m"),
                       t=draw(st.sampled_from([1.0, 0.7, 0.3, 1.5, 3.0]), label="t"))


@st.composite
def broad_chain_cases(draw: st.DrawFn) -> ChainCase:
    case = draw(cases(max_batch=1, max_vocab=4096), label="case")
    return ChainCase(case, draw(chain_params(case.vocab), label="chain"))


def _ranked(x: np.ndarray) -> np.ndarray:
    """Finite ids in descending value order, lower id first among ties (the oracle's order)."""
    order = np.argsort(-x, kind="stable")
    return order[np.isfinite(x[order])]


def _between(a: float, b: float) -> float:
    """A float32 value strictly between a > b, halfway: a parameter no rounding puts on a token."""
    return float(np.float32((a + b) / 2))


@st.composite
def interacting_chain_cases(draw: st.DrawFn, tries: int = 12) -> ChainCase:
    """A row and parameters on which one drawn known mistake (``attribution.TARGETS``: an
    adjacent swap, temperature first, a hand-off) keeps other tokens than the correct chain:
    each stage's parameter is drawn from the row the correct chain hands it (module docstring),
    up to ``tries`` times until the float64 chains differ."""
    # the windowed normaliser twice as often: only its cases (over 1,000 tokens, top_k off) show it
    target = draw(st.sampled_from(TARGETS + (WINDOWED,)), label="mistake aimed at")
    window = target is WINDOWED
    family = draw(st.sampled_from(("flat", "zipf") if window else _FAMILIES), label="family")
    vocab = draw(st.sampled_from(_WINDOW_VOCABS if window else _VOCABS), label="vocab")
    case = Case(family, vocab, "float32", (draw(st.integers(0, 2**16), label="seed"),))
    row = case.logits[0].astype(np.float64)
    ranked = _ranked(row)
    cp = ChainParams(NONE, 0, 1.0, 0.0, 0.0, 0, 1.0, 0.0, 1.0)
    if ranked.size < 4:
        return ChainCase(case, cp)
    for _ in range(tries):
        cp = draw(_interacting_params(row, ranked, window), label="parameters")
        if not np.array_equal(np.isfinite(CORRECT(row, cp)), np.isfinite(target.run(row, cp))):
            break
    return ChainCase(case, cp)


@st.composite
def _interacting_params(draw: st.DrawFn, row: np.ndarray, ranked: np.ndarray, window: bool) -> ChainParams:
    # a later cut that drops the tokens where two orders differ hides the difference: sometimes
    # the stages after top_k, or after top_p, stay off
    off = draw(st.sampled_from(((), ("min_p",), ("top_p", "min_p"))), label="stages left off")
    cut = draw(st.integers(3, min(ranked.size - 1, 48)), label="cut rank")
    # penalties: tokens ranked around the cut (and sometimes the maximum) are in the history
    hist = draw(st.lists(st.sampled_from(ranked[cut - 2:cut + 2].tolist()), min_size=1, max_size=4), label="history")
    if draw(st.booleans(), label="penalise the maximum?"):
        hist.append(int(ranked[0]))
    pen = dict(history=np.asarray(hist, dtype=np.int64), last_n=64,
               repeat=draw(st.sampled_from([1.0, 1.5, 2.0]), label="repeat"),
               freq=draw(st.sampled_from([0.0, 0.5]), label="freq"),
               present=draw(st.sampled_from([0.5, 1.0, 0.25]), label="present"))
    x = stage_row("penalties", row, pen)
    k = 0 if window else cut + draw(st.integers(0, 2), label="k past the cut")
    x = stage_row("top_k", x, {"k": k})
    # top_p: halfway between two cumulative masses of top_k's renormalised survivors (a window
    # case: keeping up to 900 of the row)
    order = _ranked(x)
    w = np.exp(x[order] - x[order[0]])
    cum = np.cumsum(w) / w.sum()
    top = min(order.size - 1, 900) if window else order.size - 1
    p = 1.0
    if top >= 1 and "top_p" not in off:
        j = max(1, top - draw(st.integers(0, top - 1), label="top_p drops"))
        p = _between(cum[j], cum[j - 1])
    x = stage_row("top_p", x, {"p": p, "min_keep": 0})
    # min_p: halfway (in logits) between two of top_p's survivors
    order = _ranked(x)
    m = 0.0
    if order.size >= 2 and "min_p" not in off:
        i = max(1, order.size - 1 - draw(st.integers(0, order.size - 2), label="min_p drops"))
        lo, hi = x[order[i]], x[order[i - 1]]
        if hi > lo:
            m = float(np.float32(np.exp((hi + lo) / 2 - x[order[0]])))
    t = draw(st.sampled_from(_TEMPS), label="t")
    return ChainParams(pen["history"], 64, pen["repeat"], pen["freq"], pen["present"], k, p, m, t)


@st.composite
def chain_cases(draw: st.DrawFn) -> ChainCase:
    """Interacting cases four draws in five, broad ones otherwise."""
    if draw(st.integers(0, 4), label="broad?") == 4:
        return draw(broad_chain_cases(), label="broad")
    return draw(interacting_chain_cases(), label="interacting")


def corner(family: str, vocab: int, seed: int, history: tuple[int, ...] = (), repeat: float = 1.0,
           freq: float = 0.0, present: float = 0.0, k: int = 0, p: float = 1.0, m: float = 0.0,
           t: float = 1.0) -> ChainCase:
    return ChainCase(Case(family, vocab, "float32", (seed,)),
                     ChainParams(np.asarray(history, dtype=np.int64), 64 if history else 0, repeat, freq, present,
                                 k, p, m, t))


# Pinned first, in every profile: one corner per ordered pair of adjacent stages (the pair run
# the other way round keeps other tokens there), temperature first, and each hand-off mistake.
# Each was found by the interacting draw and checked to separate its bug from the correct chain
# (``properties/zoo/test_chain_mutants.py``).
CORNERS: tuple[ChainCase, ...] = (
    # a temperature other than 1 with a cut that depends on it, and top_k then top_p
    corner("zipf", 64, 61, p=0.5, t=0.3), corner("zipf", 64, 62, p=0.8, t=3.0), corner("zipf", 64, 63, m=0.05, t=0.3),
    corner("zipf", 64, 64, k=5, p=0.8),
    # found by the interacting draw; the comment names the mistake each separates from the chain
    corner("plateaus", 8, 24408, history=(1, 0), repeat=2.0, present=0.5, k=3, t=1.5),  # top_k before penalties
    corner("flat", 8, 268, history=(1, 0), repeat=2.0, present=0.25, k=7, p=0.8426950573921204, t=0.5),  # top_p before top_k
    corner("flat", 8, 175, history=(2,), freq=0.5, present=0.25, k=7, p=0.46212875843048096, m=0.7707609534263611,
           t=4.0),  # min_p before top_p
    corner("zipf", 8, 0, history=(7,), present=0.5, k=3, p=0.9151624441146851, m=0.2571312487125397,
           t=0.25),  # temp before min_p, temp first
    corner("plateaus", 8, 24408, history=(7, 0), freq=0.5, present=1.0, k=4, p=0.46538612246513367,
           t=4.0),  # top_p fed the raw row, top_p on a stale softmax
    corner("flat", 8, 175, history=(3, 6), present=0.25, k=8, p=0.5428913235664368, m=0.8670660257339478,
           t=4.0),  # min_p fed the raw row
    corner("zipf", 1025, 11157, history=(54, 444), repeat=2.0, present=0.25, p=0.949175238609314,
           t=2.0),  # top_p normalised over a 1,000-token window
)


def with_corners(test: Callable) -> Callable:
    """Hypothesis ``example``s for every corner, visited before the drawn cases."""
    for c in reversed(CORNERS):
        test = example(cc=c)(test)
    return test


def chain_args(cc: ChainCase) -> tuple:
    """``llama_cpp_chain``'s arguments for the case (a batch of one row)."""
    cp = cc.chain
    return (cc.row[None, :], cp.history[None, :], cp.last_n, cp.repeat, cp.freq, cp.present, cp.k, cp.p, cp.m, cp.t)


def judge(chain: Callable[..., Any], cc: ChainCase) -> str | None:
    """Why ``chain`` (``llama_cpp_chain``'s signature) is wrong on ``cc``, or None; a wrong row is
    attributed to the stage order or hand-off mistake that explains it, where one does."""
    out = np.asarray(chain(*chain_args(cc)))[0]
    row64 = cc.row.astype(np.float64)
    why = violation(out, row64, cc.chain)
    return None if why is None else why + explain(out, row64, cc.chain)
