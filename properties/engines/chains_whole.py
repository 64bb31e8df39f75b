"""An engine's own chain judged whole: llama.cpp's default order, penalties -> top_k -> top_p ->
min_p -> temperature (last), against the oracle's chain with the legal sets composed stage by
stage.

The engine hands back only its final row (and, through ``llama_cpp_chain_dist``, the token it
draws), so the legal answer is composed: every stage runs on every row an earlier stage may
legally have produced (its records' ``variants``: the rounding windows), giving per stage the
tokens it must keep and may keep. The engine's survivors must lie between the last stage's sets,
its surviving values within penalties' and temperature's error models of the oracle's, and its
draws must follow one CDF of its own final row (``properties.cdf_shape``). A violation names a
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

from properties.numerics import F32_TINY, U32
from properties.samplers.records import RECORDS_BY_NAME
from properties.ties import NO_CLASS, logit_classes

STAGES = ("penalties", "top_k", "top_p", "min_p", "temp")
MAX_PATHS = 12  # distinct legal rows carried from one stage to the next


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


@dataclass(frozen=True)
class Composed:
    must: list[np.ndarray]
    may: list[np.ndarray]
    final: np.ndarray
    """The oracle's final row along the exact path (float64, -inf dropped)."""
    pen_bound_u: np.ndarray
    ties: "PostPenaltyTies"


def stage_row(name: str, x: np.ndarray, params: dict) -> np.ndarray:
    """The oracle's stage ``name`` on a dense float64 row (-inf = not a candidate), dense out."""
    return RECORDS_BY_NAME[name].run_oracle(x, params, truncated=True).dense_logits(x.size)


def compose(row64: np.ndarray, cp: ChainParams) -> Composed:
    """Must/may survivor sets after each stage, over every legal path through the chain."""
    paths, musts, mays = [row64], [], []
    pen_bound, ties = np.zeros(row64.size), post_penalty_ties(row64)
    for name in STAGES:
        rec, params = RECORDS_BY_NAME[name], cp.stage(name)
        outs, must, may = [], np.ones(row64.size, bool), np.zeros(row64.size, bool)
        for i, x in enumerate(paths):
            if rec.kind == "filter":
                m_, y_ = rec.must_may(x, params, truncated=True)
                must, may = must & m_, may | y_
                for v in rec.variants(params, x):
                    kept = rec.oracle_kept(x, v, truncated=True)
                    outs.append(np.where(kept, x, -np.inf))
            else:
                y = rec.run_oracle(x, params, truncated=True).dense_logits(row64.size)
                if name == "penalties" and i == 0:
                    pen_bound, ties = rec.transform_bound_u(x, params), post_penalty_ties(y)
                kept = np.isfinite(y)
                must, may = must & kept, may | kept
                outs.append(y)
        seen, paths = set(), []
        for y in outs:
            key = y.tobytes()
            if key not in seen and len(paths) < MAX_PATHS:
                seen.add(key)
                paths.append(y)
        musts.append(must)
        # a tied token the stage's bracket allows but no path keeps: with the engine's row
        # relabelled, the stage that kept one tied token too many is the one named
        mays.append(may & np.logical_or.reduce([np.isfinite(y) for y in outs]))
    return Composed(musts, mays, paths[0], pen_bound, ties)


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
    if np.isnan(out).any() or np.isposinf(out).any():
        return f"the chain's output holds NaN or +inf at ids {np.flatnonzero(np.isnan(out) | np.isposinf(out))[:6].tolist()}"
    c = compose(row64, cp)
    out = canonical_row(out, c.ties)  # ids below are modulo ties: see the module docstring
    kept = np.isfinite(out)
    for i, name in enumerate(STAGES):
        extra = np.flatnonzero(kept & ~c.may[i])
        if extra.size:
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
    both = kept & np.isfinite(c.final)
    want, got = c.final[both], out[both].astype(np.float64)
    allowed = (c.pen_bound_u[both] + 3) * U32 * np.abs(want) + F32_TINY
    bad = np.abs(got - want) > allowed
    if bad.any():
        j = int(np.flatnonzero(both)[np.argmax(np.abs(got - want) / allowed)])
        return (f"stage 5 (temp) or 1 (penalties): token {j}'s final logit is {out[j]!r}, the oracle's "
                f"{c.final[j]!r}, off by {abs(float(out[j]) - c.final[j]) / (U32 * max(abs(c.final[j]), F32_TINY)):.3g} u "
                f"(allowed {(c.pen_bound_u[j] + 3):.3g} u: penalties' model and two roundings of l/t)")
    return None
