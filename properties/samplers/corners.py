"""Each sampler's hard corners, pinned: every profile visits them first (the zoo runner's
``Property.corners``, and ``test_corners.py``), so a rare draw is not what decides whether a
near-threshold bug is seen.

- a large flat row (262,144 tokens, logits within ±0.5) with a small p: thousands of
  near-equal masses before the cut;
- all-tied rows (1,000 equal logits) and rows of k equal logits (k = 3, 5, 7, 100; the rest
  -inf) whose masses m/k are not exact in any binary format;
- one finite token;
- cuts placed just outside the judge's own window (``CUT_MARGIN`` times it), on both sides, so
  a correct engine is decided there and any bias larger than that flips a decision: top_k on a
  row whose next level is one ulp below the k-th logit, min_p at p = 1 on such a row (|max| >= 16,
  where one ulp exceeds the probability form's window) and with tokens at max + ln p ± 4 windows,
  top_p / typical with p at m/k ± 4 mass windows on tied rows, dist with u at CDF boundaries
  ± 4 CDF windows.
"""
from __future__ import annotations

import math
import numpy as np

from properties import numerics as nm
from properties.samplers.record import SamplerRecord
from properties.samplers.strategies import DTYPES, Case, make_logits
from properties.samplers import windows as w

CUT_MARGIN = 4.0
LARGE = 262144

def _case(name: str, rows: np.ndarray, params: list[dict], dtype: str) -> Case:
    """A batch of constructed rows (rounded to ``dtype``) with per-row parameters."""
    stacked = {k: np.stack([np.asarray(p[k]) for p in params]) for k in params[0]}
    logits = rows.astype(np.float32).astype(DTYPES[dtype])
    return Case(f"corner:{name}", rows.shape[1], dtype, tuple(range(len(params))), stacked, logits)


def _tied(k: int, v: int) -> np.ndarray:
    row = np.full(v, -np.inf)
    row[np.random.default_rng(k).choice(v, k, replace=False)] = 1.25
    return row


def _generic(record: SamplerRecord, dtype: str) -> list[Case]:
    p = record.corner
    out = [_case("all tied", np.full((1, 1000), 0.5), [p(1000)], dtype),
           _case("one finite", make_logits("one_finite", 4096, 1)[None], [p(4096)], dtype)]
    if dtype == "float32":
        out.append(_case("large flat", make_logits("flat", LARGE, 7)[None], [p(LARGE)], dtype))
    return out


def mass_cut() -> Case:
    """p at m/k ± CUT_MARGIN mass windows on rows of k equal logits, and p = m/k exactly where k
    is a power of two (every mass exact: the boundary convention itself is observable)."""
    rows, params = [], []
    for k, m in ((4, 1), (8, 3)):
        rows.append(_tied(k, 1000))
        params.append({"p": m / k, "min_keep": 0})
    for k, m in ((3, 1), (3, 2), (5, 2), (7, 3), (100, 37)):
        row = _tied(k, 1000).astype(np.float32).astype(np.float64)
        d = nm.mass_bound(row, w.descending(row), m + 1)
        for sign in (-1, 1):
            rows.append(row)
            params.append({"p": m / k + sign * CUT_MARGIN * d, "min_keep": 0})
    return _case("mass cut", np.stack(rows), params, "float32")


def _near_ties_row(base: float, v: int = 4096) -> np.ndarray:
    """Three levels one float32 ulp apart at ``base`` (a quarter of the tokens at the top)."""
    step = nm.ulp(base)
    levels = np.random.default_rng(v).integers(0, 4, v)
    return base + step * (levels == 3) - step * (levels == 0)


def top_k_cut() -> Case:
    row = _near_ties_row(3.0)
    k = int((row == row.max()).sum())
    return _case("top_k cut one ulp", np.stack([row, row]), [{"k": k}, {"k": k + 1}], "float32")


def min_p_cut() -> Case:
    rows, params = [_near_ties_row(17.0), _near_ties_row(-20.0)], [{"p": 1.0, "min_keep": 0}] * 2
    rng = np.random.default_rng(3)
    for p in (0.05, 0.1, 0.5):
        m = 4.0
        thr = m + math.log(p)
        row = np.concatenate([[m], rng.uniform(thr - 3, thr - 0.5, 61)])
        d = CUT_MARGIN * w.min_p_window(row, p)
        rows.append(np.concatenate([row, [thr - d, thr + d]]))
        params.append({"p": p, "min_keep": 0})
    width = max(r.size for r in rows)
    padded = np.stack([np.concatenate([r, np.full(width - r.size, -np.inf)]) for r in rows])
    return _case("min_p cut", padded, params, "float32")


def dist_cut() -> Case:
    row = make_logits("zipf", 64, 5).astype(np.float64)
    model = nm.softmax_model(row)
    cdf = np.cumsum(model.p)
    d = CUT_MARGIN * nm.cdf_bound(row, model=model)
    top = np.argsort(-model.p)[:6]
    us = [cdf[j] + s * d for j in top for s in (-1, 1) if 0 <= cdf[j] + s * d < 1]
    return _case("dist cut", np.stack([row] * len(us)), [{"u": u} for u in us], "float32")


def sigma_convention() -> Case:
    """The population std (divide by n): on [0, 1] (std 1/2) with n = 1.6 and [0, 0, 1, 1] with
    n = 1.9 the zeros sit 0.2 and 0.05 below the cut; a sample std (n - 1) keeps them."""
    rows = np.array([[0.0, 1.0, -np.inf, -np.inf], [0.0, 0.0, 1.0, 1.0]])
    return _case("std convention", rows, [{"n": 1.6}, {"n": 1.9}], "float32")


def corners(record: SamplerRecord | None, dtype: str) -> tuple[Case, ...]:
    """The pinned corners of ``record`` in ``dtype`` (none for records without an impl or without
    corner parameters: the catalogue test lists which those are)."""
    if record is None or not record.has_impl or record.corner is None:
        return ()
    cut = (record.cut(),) if record.cut is not None and dtype == "float32" else ()
    return cut + tuple(_generic(record, dtype))
