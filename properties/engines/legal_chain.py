"""The legal results of a sampler chain, composed stage by stage: the one composition behind every
whole-chain judge (llama.cpp's chain in ``chains_whole``, transformers' and vLLM's in
``engine_chains``).

An engine hands back only its final row, so what it may legally have returned is composed: each
stage's record runs on every row an earlier stage may legally have produced (its ``variants``:
the float32 rounding windows), giving per stage the tokens it must keep (kept on every legal
path) and may keep (kept on some). At most ``MAX_PATHS`` distinct rows are carried from one stage
to the next, the exact path first (a record's first variant is its own parameters), so the exact
path's rows and the transforms' error models along it come out of the same walk. A token the
engine kept is blamed on the first stage whose may-set leaves it out: the first stage that drops
it on every legal path.

What else is legal differs by engine: ties that travel between stages, the error a transform
hands on to the next filter's ranking. A judge passes that rule in as ``widen``; llama.cpp's
judge instead relabels the engine's row modulo ties and keeps only the may-tokens some carried
path keeps (``may_on_paths``).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from properties.numerics import F32_TINY, U32
from properties.samplers.record import Params, SamplerRecord

MAX_PATHS = 12  # distinct legal rows carried from one stage to the next


@dataclass(frozen=True)
class Stage:
    record: SamplerRecord
    params: Params


Widen = Callable[[Stage, np.ndarray, np.ndarray, np.ndarray, float],
                 tuple[np.ndarray, np.ndarray, list[np.ndarray]]]
"""(stage, carried row, must, may, err) -> (must, may, further legal rows after the filter):
a filter's bracket widened by what the engine's own rule makes legal beyond the record's variants;
``err`` is the largest float32 error in the values the transforms so far handed on."""


@dataclass(frozen=True)
class LegalChain:
    must: list[np.ndarray]
    """Per stage: the tokens every legal path keeps after it."""
    may: list[np.ndarray]
    """Per stage: the tokens some legal path keeps after it."""
    exact: list[np.ndarray]
    """Per stage: the oracle's row after it along the exact path (float64, -inf dropped)."""
    bound_u: list[np.ndarray]
    """Per stage: the transforms' error models so far, summed along the exact path, in u of the
    exact value."""

    @property
    def final(self) -> np.ndarray:
        return self.exact[-1]


def compose(row64: np.ndarray, stages: list[Stage], *, truncated: bool = False, widen: Widen | None = None,
            may_on_paths: bool = False) -> LegalChain:
    """Must/may survivor sets after each stage, over the legal paths through ``stages``.

    ``truncated``: the records run on the finite candidates only (a truncating engine);
    ``widen``: the engine's extra legal choices at each filter; ``may_on_paths``: a may-token no
    carried path keeps is left out (a stage's bracket may allow any of several tied tokens, while
    each path keeps one: with the engine's row relabelled modulo ties, the stage keeping one tied
    token too many is the one named)."""
    paths, musts, mays, exact, bounds = [row64], [], [], [], []
    bound = np.zeros(row64.size)
    err = 0.0
    for stage in stages:
        rec, params = stage.record, stage.params
        outs, must, may = [], np.ones(row64.size, bool), np.zeros(row64.size, bool)
        for i, x in enumerate(paths):
            if rec.kind == "filter":
                m_, y_ = rec.must_may(x, params, truncated=truncated)
                extra: list[np.ndarray] = []
                if widen is not None:
                    m_, y_, extra = widen(stage, x, m_, y_, err)
                must, may = must & m_, may | y_
                outs += [np.where(rec.oracle_kept(x, v, truncated=truncated), x, -np.inf)
                         for v in rec.variants(params, x)]
                outs += extra
            else:
                y = rec.run_oracle(x, params, truncated=truncated).dense_logits(row64.size)
                if i == 0:  # a transform's relative error carries through the later stages' exact copies
                    bound = bound + rec.transform_bound_u(x, params)
                    fin = np.isfinite(y)
                    err = float((bound[fin] * U32 * np.abs(y[fin])).max(initial=0.0))
                kept = np.isfinite(y)
                must, may = must & kept, may | kept
                outs.append(y)
        seen, paths = set(), []
        for y in outs:
            key = y.tobytes()
            if key not in seen and len(paths) < MAX_PATHS:
                seen.add(key)
                paths.append(y)
        if may_on_paths:
            may = may & np.logical_or.reduce([np.isfinite(y) for y in outs])
        musts.append(must)
        mays.append(may)
        exact.append(paths[0])
        bounds.append(bound)
    if not stages:  # no stage active: the row itself is the only legal answer
        fin = np.isfinite(row64)
        return LegalChain([fin], [fin], [row64], [bound])
    return LegalChain(musts, mays, exact, bounds)


def nonfinite_output(out: np.ndarray) -> str | None:
    """A chain's output may hold -inf (dropped) but never NaN or +inf."""
    bad = np.isnan(out) | np.isposinf(out)
    if bad.any():
        return f"the chain's output holds NaN or +inf at ids {np.flatnonzero(bad)[:6].tolist()}"
    return None


def first_dropping_stage(kept: np.ndarray, may: list[np.ndarray]) -> tuple[int, np.ndarray] | None:
    """The first stage that drops a token the engine kept on every legal path, and those tokens."""
    for i, m in enumerate(may):
        extra = np.flatnonzero(kept & ~m)
        if extra.size:
            return i, extra
    return None


def worst_value(out: np.ndarray, final: np.ndarray, allowed_u: np.ndarray) -> int | None:
    """The token whose surviving value is furthest outside ``allowed_u`` u of the exact path's
    (relative to the allowance), or None where every survivor both rows share is within it."""
    both = np.isfinite(out) & np.isfinite(final)
    allowed = allowed_u[both] * U32 * np.abs(final[both]) + F32_TINY
    err = np.abs(out[both].astype(np.float64) - final[both])
    if (err > allowed).any():
        return int(np.flatnonzero(both)[np.argmax(err / allowed)])
    return None
