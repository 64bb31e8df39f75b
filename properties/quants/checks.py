"""Quantization property bodies, written once: the pytest tests and the bug zoo both call them
through the table in ``properties.quants.suite``. Each takes an ``Impl`` and a drawn case,
raises a ``properties.failure.Failure`` (property, format, case and, where measured, the error in u
against its bound, as fields), and returns what it measured."""
from __future__ import annotations

import math
import numpy as np

import oracle.quants as oq
from properties.failure import Failure
from properties.numerics import U32, U64, gamma
from properties.measure import ErrorReport
from properties.quants.strategies import RawCase, ValueCase


def fail(prop: str, case: object, why: str, report: ErrorReport | None = None, category: str = "") -> None:
    """The property said no on ``case``, a case of one format (its record names the failure's)."""
    raise Failure(why, property=prop, record=getattr(getattr(case, "record", None), "name", ""), case=case,
                  dtype="", report=report, category=category)


def bit_mismatch(got: np.ndarray, want: np.ndarray) -> str | None:
    """None if equal bit for bit (any NaN matches any NaN), else the first differing element."""
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape or got.dtype != np.float32:
        return f"returned {got.dtype}{list(got.shape)}, expected float32{list(want.shape)}"
    g, w = got.reshape(-1), want.reshape(-1)
    same = (g.view(np.uint32) == w.view(np.uint32)) | (np.isnan(g) & np.isnan(w))
    if same.all():
        return None
    i = int(np.flatnonzero(~same)[0])
    return (f"{int((~same).sum())} element(s) differ; first at flat index {i}: got {g[i]!r} "
            f"(0x{int(g.view(np.uint32)[i]):08x}), oracle {w[i]!r} (0x{int(w.view(np.uint32)[i]):08x})")


def check_dequantize(qimpl, case: RawCase) -> None:
    """impl dequantization == oracle, bit for bit, NaN positions equal, signed zeros equal."""
    got = qimpl("dequantize", case.raw, int(case.record.qtype), case.shape)
    why = bit_mismatch(got, case.record.oracle(case.raw, case.shape))
    if why:
        fail("dequantize bit-exact", case, why)


def check_row_at_offset(qimpl, case: RawCase, base: int, row: int) -> None:
    """The tensor placed ``base`` bytes into a buffer of junk: dequantize_row(row) equals row
    ``row`` of the whole dequantized matrix."""
    rng = np.random.default_rng(case.seed ^ 0x5EED)
    buf = np.concatenate([rng.integers(0, 256, base, dtype=np.uint8), case.raw,
                          rng.integers(0, 256, 7, dtype=np.uint8)])
    n = case.shape[1]
    got = qimpl("dequantize_row", buf, int(case.record.qtype), n, row, base)
    want = case.record.oracle(case.raw, case.shape)[row]
    why = bit_mismatch(got, want)
    if why:
        fail("row at block-aligned offset", case, f"row {row} at base {base}: {why}")


def check_get_rows(qimpl, case: RawCase, ids: list[int]) -> None:
    idx = np.asarray(ids, dtype=np.int64)
    got = qimpl("get_rows", case.raw, int(case.record.qtype), case.shape, idx)
    want = case.record.oracle(case.raw, case.shape)[idx] if idx.size else np.zeros((0, case.shape[1]), np.float32)
    why = bit_mismatch(got, want)
    if why:
        fail("get_rows", case, f"ids {ids}: {why}")


def matvec_bound_u(k: int) -> float:
    """fp32 dot product of k terms, any summation order, FMA or not: |y^ - y| <= γ_k·Σ|w·x| with
    γ_k = k·u/(1 - k·u); plus the float64 oracle's own γ_k(2^-53), both in units of u32·Σ|w·x|."""
    return (gamma(k, U32) + gamma(k, U64)) / U32


def check_matvec(qimpl, case: RawCase, seed: int) -> ErrorReport:
    """impl W·x (fp32 accumulation) against the float64 oracle, within γ_k·Σ|w·x| per row."""
    k = case.shape[1]
    x = np.random.default_rng(seed).standard_normal(k).astype(np.float32)
    qt = int(case.record.qtype)
    got = np.asarray(qimpl("matvec", case.raw, qt, case.shape, x))
    want = oq.matvec(case.raw, qt, case.shape, x)
    if got.shape != want.shape:
        fail("matvec error model", case, f"returned shape {got.shape}, expected {want.shape}", category="contract")
    mag = np.abs(oq.dequantize(case.raw, qt, case.shape).astype(np.float64)) @ np.abs(x.astype(np.float64))
    err = np.abs(got.astype(np.float64) - want)
    err_u = np.where(mag > 0, err / np.where(mag > 0, U32 * mag, 1.0), np.where(err == 0, 0.0, math.inf))
    i = int(np.argmax(err_u))
    rep = ErrorReport(float(err_u[i]), matvec_bound_u(k), i)
    if not rep.ok or not np.isfinite(got).all():
        fail("matvec error model", case, f"row {i}: {rep.describe()}; got {got[i]!r}, oracle {want[i]!r}", rep)
    return rep


def check_roundtrip(qimpl, case: ValueCase) -> ErrorReport:
    """oracle quantize -> impl dequantize stays within the format's per-element bound. The report
    is in units of the block's step d (see properties/quants/records.py for each bound)."""
    rec = case.record
    stored = oq.quantize(case.values, rec.qtype)
    back = np.asarray(qimpl("dequantize", stored, int(rec.qtype), case.values.shape))
    x = case.values.astype(np.float64).reshape(-1, rec.block)
    allowed, unit = (np.broadcast_to(a, x.shape) for a in rec.roundtrip(x, stored.reshape(-1, rec.nbytes)))
    err = np.abs(back.astype(np.float64).reshape(x.shape) - x)
    unit = np.where(unit > 0, unit, 1.0)
    over = ~(err <= allowed)  # NaN counts as over
    if over.any():
        i = np.unravel_index(int(np.flatnonzero(over)[0]), x.shape)
        fail("round trip bound", case, f"block {i[0]} element {i[1]}: x={x[i]!r} -> {back.reshape(x.shape)[i]!r}, "
             f"error {err[i]:.6g} > allowed {allowed[i]:.6g}", category="error bound")
    ratio = np.where(allowed > 0, err / np.where(allowed > 0, allowed, 1.0), 0.0)
    j = np.unravel_index(int(np.argmax(ratio)), x.shape)
    return ErrorReport(float(err[j] / unit[j]), float(allowed[j] / unit[j]), int(j[0] * rec.block + j[1]))


def check_idempotent(qimpl, case: ValueCase) -> None:
    """P = dequantize∘quantize is a projection: P(P(x)) == P(x) as values (±0 compare equal)."""
    qt, shape = case.record.qtype, case.values.shape
    once = np.asarray(qimpl("dequantize", oq.quantize(case.values, qt), int(qt), shape))
    twice = np.asarray(qimpl("dequantize", oq.quantize(once, qt), int(qt), shape))
    same = (once == twice) | (np.isnan(once) & np.isnan(twice))
    if not same.all():
        i = np.unravel_index(int(np.flatnonzero(~same.reshape(-1))[0]), shape)
        fail("idempotent re-quantization", case, f"at {i}: P(x)={once[i]!r}, P(P(x))={twice[i]!r}")
