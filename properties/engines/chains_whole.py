"""An engine's own chain judged whole: llama.cpp's default order, penalties -> top_k -> top_p ->
min_p -> temperature (last), against the oracle's chain with the legal sets composed stage by
stage.

The legal answer is composed (``legal_chain``): every stage runs on every row an earlier stage
may legally have produced (its records' ``variants``: the rounding windows), giving per stage
the tokens it must keep and may keep. The engine's survivors must lie between the last stage's
sets, its surviving values within penalties' and temperature's error models of the oracle's, and
its draws must follow one CDF of its own final row (``properties.cdf_shape``). A violation names a
stage: for a token kept, the first stage that drops it in every legal variant; for a token
dropped that every stage keeps, the last stage that cuts on this row (whose cut the engine's
disagrees with: its threshold, or the row handed to it, differs).

Ties travel between stages: tokens whose post-penalty logits are equal in float32 (the
correctly rounded values a float32 engine holds; ``properties.ties.logit_classes`` of them) are
interchangeable in every later stage (top_k, top_p, min_p and temperature decide on values; only
their tie-break looks at ids), so the engine's row is judged after a canonical relabelling:
within each such class, the tokens it kept are moved, values and all, to the tokens the oracle's
own order prefers (larger float64 value, then lower id: for equal float64 values, the lowest
ids). The stage paths then need carry only the oracle's choice, and the count kept per class is
still judged: a stage keeping one tied token too many lands on a token no legal path keeps.
Without it, a top_p that legally kept the 7th of 8 tokens from another tied id was blamed on
min_p (a no-op at m = 0) on the nightly; and real llama.cpp, whose float32 penalties round two
distinct float64 results (2l - 0.5 for logits one ulp apart) to one value, kept the "wrong" one.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from properties.engines import legal_chain
from properties.engines.legal_chain import LegalChain, Stage, first_dropping_stage, nonfinite_output, worst_value
from properties.numerics import F32_TINY, U32
from properties.samplers.records import RECORDS_BY_NAME
from properties.ties import NO_CLASS, logit_classes

STAGES = ("penalties", "top_k", "top_p", "min_p", "temp")


@dataclass(frozen=True)
class ChainParams:
    history: np.ndarray
    last_n: int
    repeat: float
    freq: float
    present: float
    k: int
    p: float
    m: float
    t: float

    def stage(self, name: str) -> dict:
        return {"penalties": {"history": self.history, "last_n": self.last_n, "repeat": self.repeat,
                              "freq": self.freq, "present": self.present},
                "top_k": {"k": self.k}, "top_p": {"p": self.p, "min_keep": 0},
                "min_p": {"p": self.m, "min_keep": 0}, "temp": {"t": self.t}}[name]


def stage_row(name: str, x: np.ndarray, params: dict) -> np.ndarray:
    """The oracle's stage ``name`` on a dense float64 row (-inf = not a candidate), dense out."""
    return RECORDS_BY_NAME[name].run_oracle(x, params, truncated=True).dense_logits(x.size)


def compose(row64: np.ndarray, cp: ChainParams) -> LegalChain:
    """Must/may survivor sets after each stage, over every legal path through the chain; ties are
    judged by relabelling the engine's row (``canonical_row``), so a may-token no path keeps is out."""
    stages = [Stage(RECORDS_BY_NAME[name], cp.stage(name)) for name in STAGES]
    return legal_chain.compose(row64, stages, truncated=True, may_on_paths=True)


@dataclass(frozen=True)
class PostPenaltyTies:
    classes: np.ndarray
    """Tie classes of the post-penalty row in float32 (``NO_CLASS``: no candidate)."""
    rank: np.ndarray
    """Each token's place in the oracle's order of the float64 post-penalty row (larger value
    first, then lower id): within a class, the oracle keeps the best-placed tokens."""


def post_penalty_ties(y64: np.ndarray) -> PostPenaltyTies:
    order = np.argsort(-y64, kind="stable")
    rank = np.empty(y64.size, dtype=np.int64)
    rank[order] = np.arange(y64.size)
    return PostPenaltyTies(logit_classes(y64.astype(np.float32)), rank)


def canonical_row(out: np.ndarray, ties: PostPenaltyTies) -> np.ndarray:
    """``out`` with, in every tie class, its finite entries moved (in id order) to the class's
    best-placed tokens: the engine's row as it would be had it broken ties as the oracle does."""
    kept, classes = np.isfinite(out), ties.classes
    live = np.flatnonzero(classes != NO_CLASS)
    by = live[np.lexsort((ties.rank[live], classes[live]))]  # by class, best-placed first
    c = classes[by]
    place = np.arange(by.size) - np.searchsorted(c, c, side="left")
    want = np.bincount(c, weights=kept[by], minlength=int(c.max(initial=-1)) + 1).astype(np.int64)
    dest = kept & (classes == NO_CLASS)
    dest[by[place < want[c]]] = True
    moved = np.unique(classes[kept != dest])  # only classes kept off their best-placed tokens
    res = out.copy()
    for k in moved[moved != NO_CLASS]:
        members = classes == k
        vals = out[np.flatnonzero(kept & members)]
        res[members] = -np.inf
        res[np.flatnonzero(dest & members)] = vals
    return res


def violation(out: np.ndarray, row64: np.ndarray, cp: ChainParams) -> str | None:
    """Why the engine's final row ``out`` (float32) is not a legal result of the chain, or None."""
    why = nonfinite_output(out)
    if why:
        return why
    c, pen = compose(row64, cp), STAGES.index("penalties")
    out = canonical_row(out, post_penalty_ties(c.exact[pen]))  # ids below are modulo ties: see the module docstring
    kept = np.isfinite(out)
    dropped = first_dropping_stage(kept, c.may)
    if dropped:
        i, extra = dropped
        name = STAGES[i]
        return (f"stage {i + 1} ({name}) drops {extra.size} token(s) the engine kept, e.g. ids "
                f"{extra[:6].tolist()} (after {name}: must={int(c.must[i].sum())}, may={int(c.may[i].sum())}, "
                f"engine kept {int(kept.sum())})")
    missing = np.flatnonzero(c.must[-1] & ~kept)
    if missing.size:
        droppers = [n for j, n in enumerate(STAGES) if RECORDS_BY_NAME[n].kind == "filter"
                    and c.may[j].sum() < (c.may[j - 1].sum() if j else np.isfinite(row64).sum())]
        where = (f"the cut it disagrees with is {droppers[-1]}'s, the last stage that drops tokens on this row: "
                 f"its threshold or the row handed to it differs" if droppers else
                 "no stage of llama.cpp's chain drops a token on this row: the engine cuts where it does not "
                 "(a filter's threshold, or the row handed to it, e.g. a temperature applied before the filters)")
        return (f"the engine dropped {missing.size} token(s) every stage keeps, e.g. ids {missing[:6].tolist()} "
                f"(must={int(c.must[-1].sum())}, engine kept {int(kept.sum())}); {where}")
    pen_bound_u = c.bound_u[pen]  # penalties' model alone: temperature's two roundings are the + 3
    j = worst_value(out, c.final, pen_bound_u + 3)
    if j is not None:
        return (f"stage 5 (temp) or 1 (penalties): token {j}'s final logit is {out[j]!r}, the oracle's "
                f"{c.final[j]!r}, off by {abs(float(out[j]) - c.final[j]) / (U32 * max(abs(c.final[j]), F32_TINY)):.3g} u "
                f"(allowed {(pen_bound_u[j] + 3):.3g} u: penalties' model and two roundings of l/t)")
    return None
