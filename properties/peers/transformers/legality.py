"""Is an HF warper's kept set a legal answer? Class counts bracketed by the oracle variant.

``torch.sort`` is not stable on CPU, so which of equal scores a top-p / typical warper drops is
unspecified: tokens are grouped into classes of equal pre-truncation scores (scores within 4 u of
each other after the dtype's rounding are one class), and per class HF's kept count must lie
between the oracle's at the thresholds moved by δ towards "keep fewer" and "keep more" (``shift``):
the peers' one kept-set rule (``properties.peers.kept_set``, which judges llama.cpp's [must, may]
sets too). δ = 0 in float64 (exact boundaries such as two equal logits at top_p = 0.5 are where
"<=" versus "<" shows); in float32 ``delta_for`` gives the cumulative-sum and exp rounding. Where
the counts equal the oracle's own, the probabilities are compared: ``PROB_TOL`` per dtype.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from oracle.engines import transformers as o_hf
from properties.numerics import mass_allowance, unit_roundoff
from properties.peers.kept_set import class_counts, outside_bracket, tie_classes

PROB_TOL = {"float64": 1e-12, "float32": 1e-6}


def shift(params: dict, thresholds: dict[str, int], keep_more: bool, delta: float) -> dict:
    """Thresholds moved by δ towards keeping fewer / more tokens (mass thresholds additively,
    probability thresholds by a factor e^±δ), clamped to each warper's legal range."""
    out = dict(params)
    for name, grows in thresholds.items():
        up = (grows > 0) == keep_more
        v = params[name]
        moved = (v + delta if up else v - delta) if name in ("p", "mass") else v * math.exp(delta if up else -delta)
        lo, hi = (1e-12, 1 - 1e-12) if name in ("mass", "eps") else (0.0, 1.0)
        out[name] = min(max(moved, lo), hi)
    return out


def delta_for(dtype: str, row: np.ndarray) -> float:
    if dtype == "float64":
        return 0.0  # exact: boundary equalities (e.g. two equal logits at p = 0.5) are semantics
    u, n = unit_roundoff(dtype), row.size  # the cumulative-sum allowance, plus exp's rounding of max|score|
    return mass_allowance(n, n, u) + float(np.abs(row[np.isfinite(row)]).max()) * u


@dataclass
class KeptVerdict:
    why: str | None
    """Why HF's answer is not legal, or None."""
    outcome: str
    """"boundary_bracketed" (counts other than the oracle's, inside the bracket), "identical_sets"
    or "tie_permuted" (the oracle's counts; the same tokens, or tied ones swapped)."""
    prob_diff: float = 0.0
    """Largest difference of the sorted probabilities, where the counts are the oracle's."""


def check_kept(name: str, dtype: str, hf_out: np.ndarray, key: np.ndarray, oracle: Callable[[dict], np.ndarray],
               thresholds: dict, params: dict, delta: float) -> KeptVerdict:
    """Class counts bracketed by the oracle at the shifted thresholds; probabilities where exact."""
    kept = np.isfinite(hf_out)
    exact = oracle(params)
    lo, hi = oracle(shift(params, thresholds, False, delta)), oracle(shift(params, thresholds, True, delta))
    cls, merged = tie_classes(key, dtype)
    bad = outside_bracket(kept, np.isfinite(lo), np.isfinite(hi), cls, free=merged)
    if bad:
        return KeptVerdict(f"{name}[{dtype}] kept counts per equal-score class (fewer, HF, more) outside the "
                           f"bracket: {bad}; HF kept {np.flatnonzero(kept).tolist()}, oracle "
                           f"{np.flatnonzero(np.isfinite(exact)).tolist()}", "outside")
    if not np.array_equal(class_counts(kept, cls), class_counts(np.isfinite(exact), cls)):
        return KeptVerdict(None, "boundary_bracketed")
    outcome = "identical_sets" if np.array_equal(kept, np.isfinite(exact)) else "tie_permuted"
    diff = float(np.abs(np.sort(o_hf.softmax(hf_out)) - np.sort(o_hf.softmax(exact))).max())
    why = f"{name}[{dtype}]: probabilities differ by {diff:.3g} (> {PROB_TOL[dtype]})" if diff > PROB_TOL[dtype] else None
    return KeptVerdict(why, outcome, diff)
