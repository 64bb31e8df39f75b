"""Comparing an op's float32 output with the float64 oracle in units of u = 2^-24.

An error model gives, per output element, a natural ``scale`` (what the rounding errors are
proportional to: p for softmax, |A|·|B| for a product, the pair norm for RoPE, …) and a
``bound`` in units of u·scale. The measured error is

    err_u = max(|out - exact| - FTZ_FLOOR, 0) / (u · scale)

where FTZ_FLOOR = 2^-126 admits flushing results below fp32's normal range to zero (GPU
kernels built with fast math do). Non-finite outputs must match the oracle's exactly (NaN for
NaN, the same infinity); an exact value beyond fp32's largest finite may come out as that
infinity. Every comparison also feeds a per-(op, property, dtype) histogram so
the report can show the max and the percentiles, not only pass/fail.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from properties import recording
from properties.errors import U32, ErrorReport

FTZ_FLOOR = 2.0**-126
F32_MAX = float(np.finfo(np.float32).max)
_EDGES = np.concatenate([[0.0, 1e-3], np.logspace(-3, 9, 241)[1:], [np.inf]])
_HIST: dict[str, dict[str, Any]] = {}


def nonfinite_mismatch(out: np.ndarray, exact: np.ndarray) -> str | None:
    o_nan, e_nan = np.isnan(out), np.isnan(exact)
    o_inf, e_inf = np.isinf(out), np.isinf(exact)
    bad = (o_nan != e_nan) | (o_inf != e_inf) | (e_inf & (np.sign(out) != np.sign(exact)))
    if not bad.any():
        return None
    i = np.unravel_index(int(np.flatnonzero(bad)[0]), exact.shape)
    return (f"non-finite pattern differs at {tuple(int(j) for j in i)}: impl {out[i]!r}, oracle {exact[i]!r} "
            f"({int(bad.sum())} element(s))")


def scaled_error(out: Any, exact: Any, scale: Any, bound_u: Any, u: float = U32
                 ) -> tuple[ErrorReport, np.ndarray, str | None]:
    """(worst element's report, err_u of every finite element, why-it-failed or None)."""
    o = np.asarray(out, dtype=np.float64)
    e = np.asarray(exact, dtype=np.float64)
    if o.shape != e.shape:
        return ErrorReport(np.inf, 0.0, 0), np.zeros(0), f"shape {o.shape}, oracle {e.shape}"
    # an exact value past fp32's largest finite rounds to infinity: that inf is the right answer
    rounds_to_inf = np.isinf(o) & np.isfinite(e) & (np.abs(e) >= F32_MAX) & (np.sign(o) == np.sign(e))
    e = np.where(rounds_to_inf, o, e)
    why = nonfinite_mismatch(o, e)
    if why:
        return ErrorReport(np.inf, 0.0, 0), np.zeros(0), why
    fin = np.isfinite(e)
    sc = np.broadcast_to(np.asarray(scale, dtype=np.float64), e.shape)[fin]
    bd = np.broadcast_to(np.asarray(bound_u, dtype=np.float64), e.shape)[fin]
    excess = np.maximum(np.abs(o[fin] - e[fin]) - FTZ_FLOOR, 0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        err = np.where(excess == 0, 0.0, excess / (u * sc))
        ratio = np.where(err == 0, 0.0, err / bd)
    if err.size == 0:
        return ErrorReport(0.0, 0.0, 0), err, None
    i = int(np.argmax(ratio))
    flat = int(np.flatnonzero(fin.ravel())[i])
    rep = ErrorReport(float(err[i]), float(bd[i]), flat)
    if rep.ok:
        return rep, err, None
    where = tuple(int(j) for j in np.unravel_index(flat, e.shape))
    return rep, err, (f"error {err[i]:.4g} u at {where} exceeds the model's {bd[i]:.4g} u "
                      f"(impl {o.ravel()[flat]!r}, oracle {e.ravel()[flat]!r}, scale {sc[i]:.4g})")


def note(op: str, prop: str, dtype: str, report: ErrorReport | None, err_u: np.ndarray | None = None) -> None:
    """Count the example, keep the worst report, and add the errors to the histogram."""
    recording.note(op, prop, dtype, report)
    if err_u is None or err_u.size == 0:
        return
    key = f"{op}|{prop}|{dtype}"
    h = _HIST.setdefault(key, {"counts": np.zeros(_EDGES.size - 1, dtype=np.int64), "max": 0.0,
                               "worst_ratio": 0.0})
    h["counts"] += np.histogram(err_u, bins=_EDGES)[0]
    h["max"] = max(h["max"], float(err_u.max()))
    if report is not None:
        h["worst_ratio"] = max(h["worst_ratio"], report.ratio)
    recording.table("ops_error_u", summary())


def _quantile(counts: np.ndarray, q: float) -> float:
    cum = np.cumsum(counts)
    k = int(np.searchsorted(cum, q * cum[-1]))
    return float(_EDGES[min(k + 1, _EDGES.size - 2)])  # upper edge of the bin: a bound, not a guess


def summary() -> dict[str, dict[str, float]]:
    """Per 'op|property|dtype': elements compared, max error in u, p50/p90/p99 (bin upper
    edges, 5% resolution), and the worst error as a fraction of the model's bound."""
    out = {}
    for key, h in sorted(_HIST.items()):
        c = h["counts"]
        out[key] = {"elements": int(c.sum()), "max_u": h["max"], "p50_u": _quantile(c, 0.5),
                    "p90_u": _quantile(c, 0.9), "p99_u": _quantile(c, 0.99), "worst_of_bound": h["worst_ratio"]}
    return out
