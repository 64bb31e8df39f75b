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

Ties travel between stages: tokens with equal post-penalty logits are interchangeable in every
later stage (top_k, top_p, min_p and temperature decide on values; only their tie-break looks at
ids), so the engine's row is judged after a canonical relabelling (``properties.ties``): within
each class of equal post-penalty logits, the tokens it kept are moved, values and all, to the
class's lowest ids, the ids the oracle's own tie-break keeps. The stage paths then need carry
only the lowest-id choice, and the count kept per class is still judged: a stage keeping one tied
token too many lands on an id no legal path keeps. Without it, a top_p that legally kept the 7th
of 8 tokens from another tied id was blamed on min_p (a no-op at m = 0) on the nightly.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from properties.numerics import F32_TINY, U32
from properties.samplers.records import RECORDS_BY_NAME
from properties.ties import NO_CLASS, canonical, logit_classes

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
    classes: np.ndarray
    """Tie classes of the oracle's post-penalty row (``properties.ties.logit_classes``)."""


def stage_row(name: str, x: np.ndarray, params: dict) -> np.ndarray:
    """The oracle's stage ``name`` on a dense float64 row (-inf = not a candidate), dense out."""
    return RECORDS_BY_NAME[name].run_oracle(x, params, truncated=True).dense_logits(x.size)


def compose(row64: np.ndarray, cp: ChainParams) -> Composed:
    """Must/may survivor sets after each stage, over every legal path through the chain."""
    paths, musts, mays = [row64], [], []
    pen_bound, classes = np.zeros(row64.size), logit_classes(row64)
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
                    pen_bound, classes = rec.transform_bound_u(x, params), logit_classes(y)
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
    return Composed(musts, mays, paths[0], pen_bound, classes)


def canonical_row(out: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """``out`` with, in every tie class, its finite entries moved (in id order) to the class's
    lowest ids: the engine's row as it would be had it broken ties as the oracle does."""
    kept = np.isfinite(out)
    dest = canonical(kept, classes)
    moved = np.unique(classes[kept != dest])  # only classes partly kept off their lowest ids
    res = out.copy()
    for c in moved[moved != NO_CLASS]:
        members = classes == c
        src, to = np.flatnonzero(kept & members), np.flatnonzero(dest & members)
        vals = out[src]
        res[members] = -np.inf
        res[to] = vals
    return res


def violation(out: np.ndarray, row64: np.ndarray, cp: ChainParams) -> str | None:
    """Why the engine's final row ``out`` (float32) is not a legal result of the chain, or None."""
    if np.isnan(out).any() or np.isposinf(out).any():
        return f"the chain's output holds NaN or +inf at ids {np.flatnonzero(np.isnan(out) | np.isposinf(out))[:6].tolist()}"
    c = compose(row64, cp)
    out = canonical_row(out, c.classes)  # ids below are modulo ties: see the module docstring
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
