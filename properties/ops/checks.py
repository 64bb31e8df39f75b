"""Property bodies for the ops, shared by the tests and the ops bug zoo.

Each ``check_*(oimpl, case, ...)`` raises a ``properties.failure.Failure`` (the property, the
op, the case and, where measured, the error in u against its bound, as fields) or returns what it
measured: ``(ErrorReport, err_u)`` or None. Metamorphic checks (impl against impl) allow twice
the model's bound: each side may sit the bound away from the same exact value.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from oracle import ops as oracle_ops
from properties.backends import PASS_THROUGH
from properties.ops import models as m
from properties.ops.records import OP_RECORDS_BY_NAME, OpRecord
from properties import recording
from properties.failure import Failure
from properties import numerics as nm
from properties.numerics import U32
from properties.measure import HM_LAMBDA, HM_QUANTILE, ErrorReport, hm_gate, scaled_error
from properties.ops.strategies import OpCase

# max |gelu_tanh - gelu_erf| over the reals (float64 scan of [-10, 10] at 1e-5 steps: 4.7324e-4;
# outside, both sides are within 1e-20 of 0 or of x). Rounded up in the 4th digit.
GELU_TANH_GAP = 4.733e-4


def fail(prop: str, case: Any, why: str, report: ErrorReport | None = None, category: str = "") -> None:
    """The property said no on ``case`` (an ``OpCase``: its op is the failure's record)."""
    raise Failure(why, property=prop, record=getattr(case, "op", ""), case=case, report=report, category=category)


def call(oimpl, fn: str, prop: str, case: Any, **kwargs: Any) -> Any:
    """Call the implementation; any exception is a property failure with the case attached."""
    try:
        return oimpl(fn, **kwargs)
    except PASS_THROUGH:
        raise
    except Exception as exc:
        fail(prop, case, f"{fn} raised {type(exc).__name__}: {exc}", category="crash")


def _parts(x: Any) -> tuple[np.ndarray, ...]:
    return tuple(np.asarray(p) for p in x) if isinstance(x, tuple) else (np.asarray(x),)


def compare(prop: str, case: Any, out: Any, exact: Any, scale: Any, bound: Any, factor: float = 1.0
            ) -> tuple[ErrorReport, np.ndarray]:
    """Part by part (q, k, v …): shapes equal, then the scaled error within factor·bound."""
    outs, exacts = _parts(out), _parts(exact)
    scales, bounds = _parts(scale), _parts(bound)
    if len(outs) != len(exacts):
        fail(prop, case, f"returned {len(outs)} arrays, the oracle {len(exacts)}", category="contract")
    worst, errs = ErrorReport(0.0, 0.0, 0), []
    for i, (o, e, s, b) in enumerate(zip(outs, exacts, scales, bounds)):
        if o.shape != e.shape:
            fail(prop, case, f"output {i} has shape {o.shape}, expected {e.shape}", category="contract")
        rep, err, why = scaled_error(o, e, s, factor * b)
        if why:
            fail(prop, case, f"output {i}: {why}", rep)
        errs.append(err)
        worst = max(worst, rep, key=lambda r: r.ratio)
    return worst, np.concatenate(errs) if errs else np.zeros(0)


def check_matches_oracle(oimpl, record: OpRecord, case: OpCase) -> tuple[ErrorReport, np.ndarray] | None:
    """impl ≡ oracle: the same refusal, or the same non-finite pattern and an error within the model."""
    prop = f"impl≡oracle[{record.name}]"
    try:
        exact = record.oracle(case)
    except ValueError as exc:
        try:
            record.impl(oimpl, case)
        except ValueError:
            return None
        fail(prop, case, f"the oracle refuses ({exc}) but the implementation returned a result", category="contract")
    outside = record.domain(case)
    if outside and not nm.contract(oimpl).overflow_safe:
        return _grade_outside(oimpl, record, case, exact, outside)
    try:
        out = record.impl(oimpl, case)
    except PASS_THROUGH:
        raise
    except Exception as exc:
        fail(prop, case, f"{record.fn} raised {type(exc).__name__}: {exc}", category="crash")
    if record.model is None:
        o, e = np.asarray(out), np.asarray(exact)
        if o.shape != e.shape or not np.array_equal(o, e):
            fail(prop, case, f"result {o.tolist()[:8]} (shape {o.shape}) differs from the oracle's {e.tolist()[:8]}")
        return None
    scale, bound = record.model(case, exact)
    rep, err = compare(prop, case, out, exact, scale, bound)
    n = record.gate(case) if record.gate else None
    if n:
        stat, ok = hm_gate(err, n)
        if not ok:
            fail(prop, case, f"Higham-Mary gate: the {HM_QUANTILE:.0%} quantile of err/(√{n}·u·Σ|x|) is "
                             f"{stat:.3g} > λ = {HM_LAMBDA} (independent roundings of {n} signed terms stay near "
                             f"√n·u; the worst case γ_n alone passes: {rep.describe()})", category="error bound")
    return rep, err


def _grade_outside(oimpl, record: OpRecord, case: OpCase, exact, why: str) -> None:
    """Outside the op's default domain: whether the result is still within the model is a
    robustness grade (``recording.robustness``), never a failure of the numerics."""
    try:
        out = record.impl(oimpl, case)
        scale, bound = record.model(case, exact)
        compare(f"impl≡oracle[{record.name}]", case, out, exact, scale, bound)
    except PASS_THROUGH:
        raise
    except Exception as exc:
        recording.robustness("outside the domain", record.name, False, f"{why}: {str(exc).splitlines()[0]}")
        return None
    recording.robustness("outside the domain", record.name, True, "")
    return None


def check_rms_scale_invariance(oimpl, case: OpCase, k: int) -> None:
    """rms_norm(2^k·x, eps) == rms_norm(x, eps/4^k): exact in real arithmetic, and the power of
    two keeps the stored inputs exact (cases where it would not are skipped by the caller)."""
    c = 2.0**k
    x = case.arrays["x"]
    scaled = (x.astype(np.float64) * c).astype(x.dtype)
    record = OP_RECORDS_BY_NAME["rms_norm"]
    if not nm.contract(oimpl).overflow_safe and (record.domain(case) or record.domain(case.with_arrays(x=scaled))):
        return  # outside the default domain: graded by impl≡oracle, not here
    a = call(oimpl, "rms_norm", "rms scale invariance", case, **{**case.kwargs, "x": scaled})
    b = call(oimpl, "rms_norm", "rms scale invariance", case, **{**case.kwargs, "eps": case.params["eps"] / c**2})
    exact = oracle_ops.rms_norm(**case.kwargs)
    scale, bound = m.rms_norm_model(case, exact)
    compare(f"rms_norm(2^{k}·x, eps) = rms_norm(x, eps/4^{k})", case, a, b, scale, bound, 2.0)


def check_rope_pair_norms(oimpl, case: OpCase) -> None:
    """Every rotated pair keeps its norm, times mscale; pass-through entries are unchanged."""
    out = np.asarray(call(oimpl, "rope", "rope pair norms", case, **case.kwargs), dtype=np.float64)
    x = case.arrays["x"].astype(np.float64)
    theta, mscale, first, second, nd = m.rope_geometry(case)
    got = np.hypot(out[..., first], out[..., second])
    want = abs(mscale) * np.hypot(x[..., first], x[..., second])
    _, bound = m.rope_model(case, oracle_ops.rope(**case.kwargs))
    compare("rope preserves pair norms", case, got, want, want, np.sqrt(2) * bound[..., first])
    if not np.array_equal(out[..., nd:], x[..., nd:]):
        fail("rope pass-through", case, f"entries beyond n_dims={nd} changed")


def rope_scores(oimpl, case: OpCase, k: np.ndarray, q_pos: np.ndarray, k_pos: np.ndarray):
    """(impl scores q'·k' per (token, head), exact scores, allowed error in absolute terms)."""
    qc, kc = case.with_arrays(positions=q_pos), case.with_arrays(x=k, positions=k_pos)
    q_rot = np.asarray(call(oimpl, "rope", "rope relative position", case, **qc.kwargs), dtype=np.float64)
    k_rot = np.asarray(call(oimpl, "rope", "rope relative position", case, **kc.kwargs), dtype=np.float64)
    eq, ek = oracle_ops.rope(**qc.kwargs), oracle_ops.rope(**kc.kwargs)
    sq, bq = m.rope_model(qc, eq)
    sk, bk = m.rope_model(kc, ek)
    dq, dk = U32 * sq * bq, U32 * sk * bk
    allowed = (np.abs(eq) * dk + dq * np.abs(ek) + dq * dk).sum(-1) + (eq.shape[-1] + 2) * U32 * (
        np.abs(eq) * np.abs(ek)).sum(-1)
    return (q_rot * k_rot).sum(-1), (eq * ek).sum(-1), allowed


def check_rope_relative(oimpl, case: OpCase, k: np.ndarray, k_pos: np.ndarray, shift: int) -> None:
    """q at m and k at n score the same as q at m + s and k at n + s."""
    q_pos = case.arrays["positions"].astype(np.int64)
    s1, e1, a1 = rope_scores(oimpl, case, k, q_pos, k_pos)
    s2, e2, a2 = rope_scores(oimpl, case, k, q_pos + shift, k_pos + shift)
    gap = np.abs(s1 - s2)
    worst = np.argmax(gap - (a1 + a2))
    if (gap > a1 + a2).any():
        fail(f"rope score depends only on m - n (shift {shift})", case,
             f"scores differ by {gap.flat[worst]:.4g}, allowed {(a1 + a2).flat[worst]:.4g} (exact {e1.flat[worst]:.6g})")


def check_rope_offset(oimpl, case: OpCase, s: int) -> None:
    """RoPE of rows s… at their own positions equals rows s… of the full application."""
    full = call(oimpl, "rope", "rope offset", case, **case.kwargs)
    tail_case = case.with_arrays(x=case.arrays["x"][s:], positions=case.arrays["positions"][s:])
    tail = call(oimpl, "rope", "rope offset", case, **tail_case.kwargs)
    exact = oracle_ops.rope(**tail_case.kwargs)
    scale, bound = m.rope_model(tail_case, exact)
    compare(f"rope at offset {s} == rows {s}… of the full application", case, tail, np.asarray(full)[s:], scale,
            bound, 2.0)


def check_softcap_shape(oimpl, case: OpCase) -> None:
    """softcap is odd, bounded by c, and within |x|³/(3c²) of x."""
    c, x = case.params["cap"], case.arrays["x"]
    y = np.asarray(call(oimpl, "softcap", "softcap", case, **case.kwargs), dtype=np.float64)
    y_neg = np.asarray(call(oimpl, "softcap", "softcap", case, x=-x, cap=c), dtype=np.float64)
    exact = oracle_ops.softcap(x, c)
    scale, bound = m.softcap_model(case, exact)
    compare("softcap is odd", case, -y_neg, y, scale, bound, 2.0)
    if (np.abs(y) > np.float32(c)).any():
        fail("softcap bounded by c", case, f"|y| reaches {np.abs(y).max()!r} > c = {c}")
    x64 = x.astype(np.float64)
    fin = np.isfinite(x64)
    slack = np.abs(x64[fin]) ** 3 / (3 * c * c) + 8 * U32 * (np.abs(y[fin]) + np.abs(x64[fin]))
    if (np.abs(y[fin] - x64[fin]) > slack).any():
        fail("softcap ≈ x for small x", case, "|c·tanh(x/c) - x| exceeds |x|³/(3c²)")


def check_gelu_gap(oimpl, case: OpCase) -> None:
    """gelu_tanh and gelu_erf differ by at most the approximation's known gap (plus both models)."""
    x = case.arrays["x"]
    fin = np.isfinite(x.astype(np.float64))
    t = np.asarray(call(oimpl, "gelu", "gelu tanh vs erf", case, x=x, approximate="tanh"), dtype=np.float64)
    e = np.asarray(call(oimpl, "gelu", "gelu tanh vs erf", case, x=x, approximate="none"), dtype=np.float64)
    scale, bound = m.gate_model(case, oracle_ops.gelu(x, "tanh"))
    allowed = GELU_TANH_GAP + 2 * U32 * scale * bound
    gap = np.abs(t - e)
    if (gap[fin] > allowed[fin]).any():
        fail("gelu tanh vs erf", case, f"the approximations differ by {gap[fin].max():.4g} > {GELU_TANH_GAP}")


def check_log_softmax_is_log_softmax(oimpl, case: OpCase) -> None:
    """log_softmax == log(softmax) wherever softmax is a normal float (log finite and accurate)."""
    ls = np.asarray(call(oimpl, "log_softmax", "log_softmax = log softmax", case, **case.kwargs), dtype=np.float64)
    sm = np.asarray(call(oimpl, "softmax", "log_softmax = log softmax", case, **case.kwargs), dtype=np.float64)
    ok = sm >= np.finfo(np.float32).tiny
    cs = case.with_params()
    _, b_sm = m.softmax_model(cs, oracle_ops.softmax(**cs.kwargs))
    s_ls, b_ls = m.log_softmax_model(cs, oracle_ops.log_softmax(**cs.kwargs))
    with np.errstate(divide="ignore"):
        gap = np.abs(ls - np.log(np.where(ok, sm, 1.0)))
    allowed = U32 * (b_sm + s_ls * b_ls + 2)
    if (gap[ok] > allowed[ok]).any():
        i = np.argmax(np.where(ok, gap - allowed, -np.inf))
        fail("log_softmax == log(softmax)", case, f"differ by {gap.flat[i]:.4g} > {allowed.flat[i]:.4g}")


def check_masked_equals_truncated(oimpl, case: OpCase):
    """The fixed-shape masked softmax equals the softmax of the truncated row: masked entries
    exactly 0, the rest within the model of the softmax over only the unmasked entries."""
    p = np.asarray(call(oimpl, "softmax", "masked == truncated", case, **case.kwargs), dtype=np.float64)
    z, _ = m._logits(case)
    p = np.moveaxis(p, case.params.get("axis", -1), -1)
    scale, bound = (np.moveaxis(a, case.params.get("axis", -1), -1) for a in m.softmax_model(case, None))
    worst = None
    for r in np.ndindex(z.shape[:-1]):
        keep = np.isfinite(z[r])
        if not keep.any() or np.isnan(z[r]).any() or (z[r] == np.inf).any():
            continue
        if (p[r][~keep] != 0).any():
            fail("masked softmax == truncated softmax", case, f"row {r}: a masked entry has probability != 0")
        truncated = oracle_ops.softmax(z[r][keep])
        rep, err = compare("masked softmax == truncated softmax", case, p[r][keep], truncated, scale[r][keep],
                           bound[r][keep])
        worst = (rep, err) if worst is None or rep.ratio > worst[0].ratio else worst
    return worst
