"""How far each zoo member sits from the suite's allowance, on inputs built to show it.

``python -m properties.zoo.margins`` prints one table per quantity: the measured error (in u =
2^-24 of the stated scale), the allowance the suite grants today, and the ratio (> 1: the suite
fails it). For the reductions it also prints what a derived model would grant:

- softmax split as the calibration notes (design/calibration.md §1) say: the ratios p_i / p_max against
  exp(l_i - l_max), which no summation order touches (allowed |l_i - l_max| + 6: the rounded
  argument, expf's 4 u, two divisions), and the normaliser Σp - 1 against γ_{n-1} (any order)
  or ⌈log2 n⌉ + 1 (a tree);
- matmul and rms_norm against the worst case γ_K and against the Higham-Mary statistic
  err / (√K · u · scale), whose 99th percentile stays O(1) for every correct order and grows
  with √K for a per-operand precision loss.

Deterministic: fixed seeds, no hypothesis.
"""
from __future__ import annotations

import importlib
import math
from typing import Any, Callable

import numpy as np

import gpu_impl
import oracle.ops as oo
from properties.samplers.records import RECORDS_BY_NAME
from properties.ops import models as op_models
from properties.numerics import DEFAULT, STRICT, U32, log2n, mass_allowance, softmax_model
from properties.measure import softmax_error
from properties.ops.strategies import OpCase
from properties.samplers.strategies import make_logits
from properties.zoo.conforming import MEMBERS
from properties.zoo.near_threshold import NEAR_BY_NAME, mutant_modules

SAMPLER_ROWS = (("flat", 32000), ("zipf", 32000), ("peaked", 32000), ("flat", 262144), ("zipf", 262144))


def engines(fn: str, ops: bool = False) -> dict[str, Callable]:
    """gpu_impl's ``fn`` and every conforming member's (ops: from their .ops)."""
    base = importlib.import_module("gpu_impl.ops" if ops else "gpu_impl")
    out = {"gpu_impl": getattr(base, fn)}
    for name in MEMBERS:
        mod = importlib.import_module(f"properties.zoo.conforming.{name}" + (".ops" if ops else ""))
        out[name] = getattr(mod, fn)
    return out


def near(fn: str, names: tuple[str, ...]) -> dict[str, Callable]:
    out = {}
    for n in names:
        s, o = mutant_modules(n)
        out[n] = getattr(o if NEAR_BY_NAME[n].domain == "ops" else s, fn)
    return out


def _exact_softmax(row: np.ndarray) -> np.ndarray:
    e = np.exp(row - row.max())
    return e / e.sum()


def softmax_split(fns: dict[str, Callable]) -> list[dict[str, Any]]:
    """Whole-p error against today's model, and the two halves of the split model."""
    out = []
    for fam, v in SAMPLER_ROWS:
        row = make_logits(fam, v, 7).astype(np.float64)
        p = _exact_softmax(row)
        d = np.abs(row - row.max())
        top = int(np.argmax(row))
        for name, f in fns.items():
            ph = f(row[None].astype(np.float32))[0].astype(np.float64)
            whole = softmax_error(ph, row)
            live = ph > 2.0**-126
            ratio_err = np.abs(ph[live] / ph[top] / np.exp(row[live] - row[top]) - 1) / U32
            norm = abs(ph.sum() - 1) / U32
            out.append({"engine": name, "row": f"{fam}/{v}", "whole_p_u": whole.worst_u, "whole_p_allowed_u": whole.bound_u,
                        "whole_p_ratio": whole.ratio,
                        "ratio_err_over_allowed": float((ratio_err / softmax_model(row).elementwise_u[live]).max()),
                        "norm_u": norm, "norm_today_u": 2 * log2n(v) + 4, "norm_any_order_u": v - 1,
                        "norm_tree_u": log2n(v) + 1})
    return out


def exp_allowance(fns: dict[str, Callable], rows=SAMPLER_ROWS + (("peaked", 262144),)) -> list[dict[str, Any]]:
    """The ratio check's allowance at the row's widest |l - max| before (|d| + 6: expf only) and
    now (|d| + ``exp_u`` + 2 under the default contract; strict: expf only), and each engine's worst
    ratio error over the old and the new allowance (> 1 fails)."""
    out = []
    for fam, v in rows:
        row = make_logits(fam, v, 7).astype(np.float64)
        d = np.abs(row - row.max())
        top = int(np.argmax(row))
        old, new = d + 6, softmax_model(row, DEFAULT).elementwise_u
        for name, f in fns.items():
            ph = f(row[None].astype(np.float32))[0].astype(np.float64)
            live = ph > 2.0**-126
            err = np.abs(ph[live] / ph[top] / np.exp(row[live] - row[top]) - 1) / U32
            out.append({"engine": name, "row": f"{fam}/{v}", "max|d|": float(d.max()),
                        "old_u_at_max": float(old.max()), "new_u_at_max": float(new.max()),
                        "strict_u_at_max": float(softmax_model(row, STRICT).elementwise_u.max()),
                        "err_over_old": float((err / old[live]).max()), "err_over_new": float((err / new[live]).max())})
    return out


def top_p_mass(fns: dict[str, Callable], p: float = 0.9) -> list[dict[str, Any]]:
    """The implementation's cumulative mass where the oracle crosses p, against the allowance."""
    out = []
    for fam, v in SAMPLER_ROWS:
        row = make_logits(fam, v, 7).astype(np.float64)
        order = np.lexsort((np.arange(v), -row))
        cum = np.cumsum(_exact_softmax(row)[order])
        k = int(np.searchsorted(cum, p)) + 1
        for name, f in fns.items():
            kept = int(np.isfinite(f(row[None].astype(np.float32), p)).sum())
            out.append({"engine": name, "row": f"{fam}/{v}", "oracle_k": k, "impl_k": kept,
                        "mass_gap_u": abs(cum[kept - 1] - p) / U32 if kept != k else 0.0,
                        "allowed_u": mass_allowance(k, v) / U32})
    return out


def dist_bracket(v: int = 262144) -> list[dict[str, Any]]:
    """Tokens the dist record calls legal, against what each error source can move the CDF."""
    out = []
    for fam in ("flat", "zipf"):
        row = make_logits(fam, v, 7).astype(np.float64)
        legal = RECORDS_BY_NAME["dist"].legal(row, {"u": 0.5})
        d = np.abs(row - row.max()).max()
        out.append({"row": f"{fam}/{v}", "legal_tokens": int(legal.sum()), "allowed_cdf": mass_allowance(v, v),
                    "double_running_sum_cdf": 2 * U32 * (d + 4), "any_order_f32_scan_cdf": (2 * v) * U32,
                    "tree_scan_cdf": 2 * (log2n(v) + 4) * U32})
    return out


def dist_proposed(v: int = 262144, draws: int = 64) -> list[dict[str, Any]]:
    """Selections outside the derived dist window (exp errors + a blocked normaliser and scan),
    for every engine and the bf16-probability mutant: the proposal must pass the first, not the
    second."""
    fns = {**engines("dist"), **near("dist", ("dist_bf16_probs",))}
    us = np.random.default_rng(0).random(draws)
    out = []
    for fam in ("flat", "zipf", "peaked"):
        row = make_logits(fam, v, 7)
        r = row.astype(np.float64)
        e = np.exp(r - r.max())
        cdf = np.cumsum(e) / e.sum()
        lo = np.concatenate([[0.0], cdf[:-1]])
        d = 2 * U32 * (np.abs(r - r.max()).max() + 4) + 2 * (-(-v // 1024) + 12) * U32
        for name, f in fns.items():
            ids = np.asarray(f(np.repeat(row[None], draws, axis=0), us))
            ok = (lo[ids] <= us + d) & (cdf[ids] >= us - d) & (e[ids] > 0)
            out.append({"engine": name, "row": f"{fam}/{v}", "window": d, "outside": int((~ok).sum()), "draws": draws})
    return out


def _op_stats(out: np.ndarray, exact: np.ndarray, scale: np.ndarray, k: int) -> tuple[float, float]:
    err = np.abs(out.astype(np.float64) - exact) / (U32 * scale)
    return float(err.max()), float(np.percentile(err / math.sqrt(k), 99))


def matmul_margins(fns: dict[str, Callable]) -> list[dict[str, Any]]:
    """Every matmul family the suite draws (operands as its strategy fills them), 8×K×16."""
    from properties.ops.records import MATMUL_FAMS

    out = []
    for fam in MATMUL_FAMS:
        for k in (128, 1000, 4096):
            case = OpCase("matmul", "float32", fam, 3, {"m": 8, "k": k, "n": 16})
            a, b = case.arrays["a"], case.arrays["b"]
            exact = a.astype(np.float64) @ b.astype(np.float64)
            scale = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
            for name, f in fns.items():
                worst, hm = _op_stats(np.asarray(f(a, b)), exact, scale, k)
                out.append({"engine": name, "family": fam, "K": k, "max_u": worst, "allowed_u": k + 2.0,
                            "ratio": worst / (k + 2), "p99_err_over_sqrtK_u": hm})
    return out


def rms_margins(fns: dict[str, Callable]) -> list[dict[str, Any]]:
    out = []
    for fam in ("normal", "scaled", "tiny"):
        for n in (64, 4096):
            case = OpCase("rms_norm", "float32", fam, 3, {"rows": 4, "n": n, "weight": 0}, {"eps": 1e-6})
            exact = oo.rms_norm(**case.kwargs)
            scale, bound = op_models.rms_norm_model(case, exact)
            for name, f in fns.items():
                worst, hm = _op_stats(np.asarray(f(**case.kwargs)), exact, scale, n)
                out.append({"engine": name, "family": fam, "n": n, "max_u": worst, "allowed_u": float(bound.max()),
                            "ratio": worst / float(bound.max()), "p99_err_over_sqrtn_u": hm})
    return out


def min_p_shift(ps: tuple[float, ...] = (0.05, 0.1, 0.5)) -> list[dict[str, Any]]:
    """How far the half-precision ln p moves the threshold, against the min_p bracket."""
    out = []
    for p in ps:
        shift = abs(float(np.log(np.float16(p))) - math.log(p))
        for top in (0.0, 20.0):
            eps = 4 * U32 * (abs(top) + abs(math.log(p)) + 1)
            out.append({"p": p, "max_logit": top, "threshold_shift": shift, "bracket_width": eps, "ratio": shift / eps})
    return out


def engine_threshold_may(v: int = 1000) -> list[dict[str, Any]]:
    """Undecided tokens (may and not must) of the engine probability-threshold records today, and
    under a bracket derived at the threshold: ln p_i is within u·(|ln p_thr| + 6) of exact for a
    ratio test (min_p: p_i / p_max, no normaliser), plus the normaliser's γ_{n-1} for an absolute
    one (epsilon, eta compare p_i itself)."""
    from properties.engines.records import ENGINE_RECORDS

    recs = {r.name: r for r in ENGINE_RECORDS}
    out = []
    for name, param, val, absolute in (("transformers.min_p", "p", 0.05, False), ("transformers.epsilon", "eps", 3e-4, True),
                                       ("transformers.eta", "eps", 3e-4, True), ("vllm.min_p", "p", 0.05, False)):
        for fam, seed, low in (("peaked", 11, None), ("zipf", 11, None), ("zipf", 11, -1e4), ("zipf", 11, -1e9)):
            row = make_logits(fam, v, seed).astype(np.float64)
            if low is not None:  # one finitely masked token (-1e4, -1e9: masking constants engines use)
                row[0] = low
            params = {param: val, "min_keep": 1} if "vllm" not in name else {param: val}
            must, may = recs[name].must_may(row, params)
            d = row - row.max()
            lp = d - math.log(np.exp(d).sum())  # ln p without underflow
            thr = math.log(val) + (lp.max() if not absolute else 0.0)
            if name.endswith("eta"):  # eta's cut: min(eps, sqrt(eps)·exp(-H))
                h = float(-(np.exp(lp) * lp).sum())
                thr = math.log(min(val, math.sqrt(val) * math.exp(-h)))
            eps = U32 * (abs(thr) + 6 + (v - 1 if absolute else 0))
            out.append({"record": name, "row": f"{fam}/{v}" + (f" + one {low:g}" if low else ""), "spread": float(-d.min()),
                        "undecided_today": int((may & ~must).sum()),
                        "undecided_derived": int((np.abs(lp - thr) <= eps).sum())})
    return out


def tightening(v: int = 262144) -> list[dict[str, Any]]:
    """Each bracket the derived models changed, old allowance against the derived one on the same row
    (old/new > 1: tighter). Old: ``mass_allowance`` for masses and the CDF (a sequential scan's
    2k, a tree normaliser), e^{±4u(spread + log2 n + 8 + 2 ln n)} for engine probability
    thresholds. New: ``numerics.cdf_bound``, ``mass_bound`` at the crossing, ``threshold_window``."""
    from properties import numerics as nm
    from properties.engines.records import threshold_window
    from properties.engines.selections import ratio_eps
    from properties.samplers import windows as w

    out = []
    for fam in ("flat", "zipf", "peaked", "huge"):
        row = make_logits(fam, v, 7).astype(np.float64)
        n = int(np.isfinite(row).sum())
        old_cdf = mass_allowance(v, v)
        finite = np.isfinite(row)
        e = np.where(finite, np.exp(row - row[finite].max()), 0.0)
        cdf = np.cumsum(e) / e.sum()
        lo = np.concatenate([[0.0], cdf[:-1]])
        old_legal = int(((e > 0) & (lo <= 0.5 + old_cdf) & (cdf >= 0.5 - old_cdf)).sum())
        out.append({"bracket": "dist CDF window (u = 0.5)", "row": f"{fam}/{v}", "old": old_cdf, "new": nm.cdf_bound(row),
                    "old_over_new": old_cdf / nm.cdf_bound(row),
                    "legal_tokens": f"{old_legal} -> {int(w.dist_legal(row, {'u': 0.5}).sum())}"})
        for name, order in (("top_p", w.descending(row)), ("typical", w.typical_order(row))):
            for p in (0.5, 0.95):
                k = int(RECORDS_BY_NAME[name].oracle_kept(row, {"p": p, "min_keep": 0}).sum())
                old, new = mass_allowance(k, n), nm.mass_bound(row, order, min(k + 1, v))
                out.append({"bracket": f"{name} mass (p = {p})", "row": f"{fam}/{v}", "old": old, "new": new,
                            "old_over_new": old / new, "legal_tokens": f"k = {k}"})
        old_thr = ratio_eps(row, 2 * math.log(max(v, 2)))
        for form, val in (("ratio", 0.05), ("absolute", 3e-4), ("eta", 2e-3)):
            new = threshold_window(row, val, form)
            out.append({"bracket": f"engine {form} threshold ({val}), log-space", "row": f"{fam}/{v}", "old": min(old_thr, 700.0),
                        "new": new, "old_over_new": min(old_thr, 700.0) / new, "legal_tokens": ""})
    return out


def main() -> None:
    sections = [
        ("softmax, split model", softmax_split({**engines("softmax"), **near("softmax", ("softmax_fp16_exp",))})),
        ("exp allowance, before and after the exp forms",
         exp_allowance({**engines("softmax"), **near("softmax", ("softmax_fp16_exp",))})),
        ("top_p mass at the crossing", top_p_mass({**engines("top_p"), **near("top_p", ("top_p_fp16_probs",))})),
        ("dist legal bracket", dist_bracket()),
        ("dist under the derived window", dist_proposed()),
        ("matmul", matmul_margins({**engines("matmul", ops=True),
                                   **near("matmul", ("matmul_tf32_inputs", "matmul_bf16_inputs"))})),
        ("rms_norm", rms_margins({**engines("rms_norm", ops=True),
                                  **near("rms_norm", ("rms_norm_eps_outside_sqrt", "rms_norm_fp16_accum"))})),
        ("min_p threshold in fp16", min_p_shift()),
        ("engine probability thresholds: undecided tokens", engine_threshold_may()),
        ("brackets changed by the derived models: old / new", tightening()),
    ]
    for title, rows in sections:
        print(f"\n## {title}\n")
        keys = list(rows[0])
        print("| " + " | ".join(keys) + " |\n|" + "---|" * len(keys))
        for r in rows:
            print("| " + " | ".join(f"{v:.4g}" if isinstance(v, float) else str(v) for v in r.values()) + " |")


if __name__ == "__main__":
    main()
