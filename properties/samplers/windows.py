"""The rounding windows of the samplers' decisions, each derived from the one numerics model
(``properties.numerics``) under the active contract, on the row the implementation received.

A window is how far the float32 quantity a decision compares (a cumulative mass, a probability,
a threshold on the logits, a typicality score, a CDF) may legally sit from the float64 value:
the record's ``variants`` move the parameter by it, or its ``key`` says which tokens are
interchangeable within it. Every window is a bound (first order, with the stated factors), never
a tuned constant:

- mass (top_p, typical): each p^_i within its relative bound (order-free elementwise u·(|d_i| +
  exp_u(d_i) + 2) plus the normaliser θ), then the k-term sum in any order the contract accepts
  (``numerics.mass_bound``);
- min_p on logits: fl(max + logf(p32)): u·(|max + ln p| + log_error_u(ln p) + 1) (exact at p = 1); on
  probabilities (p^_i >= p·p^_max, the other legal form): the ratio's u·(|ln p| + exp_u + 2) +
  p32's and the product's rounding, so u·(|ln p| + exp_u(ln p) + 4);
- xtc: p^_i >= t: t·(u·(|d_t| + exp_u(d_t) + 2) + θ) + t's rounding, d_t = ln(t·S) the argument
  of a token at the threshold;
- top_n_sigma: max - n·σ with σ from two passes: the squares' sum (``sum_bound``), the divide and
  the root (σ·(θ_sq/2 + 3u)), the mean's error at second order, and the threshold's roundings;
- typical's scores |-ln p^ - H^|: each -ln p^ within ρ_i + u·log_error_u(ln p) (logf: 2u·|ln p|
  strict, 8u·|ln p| (Metal's 4-ulp log), + 8u for p >= 0.5 (its fast log's 2^-21), by default), H^ within
  θ·Σp|ln p + 1| + uΣp(|d| + exp_u(d) + 2)|ln p + 1| + uH + uΣp·log_error_u(ln p) + the sum's own
  bound; tokens whose fp32 probability is below the normal range (l - max < ln 2^-126, ±S) carry
  no relative precision at all and are one tie group (``properties.ties``: the underflowed zeros);
- dist: ``numerics.cdf_bound``;
- every logarithm (logf, log2f) within the contract's ``numerics.log_error_u``.
"""
from __future__ import annotations

import math

import numpy as np

from oracle.candidates import ascending_order, descending_order
from properties import numerics as nm
from properties.numerics import U32, F32_TINY
from properties.samplers.record import Params, SamplerRecord
from properties.ties import underflowed


def exact_masses(row: np.ndarray) -> bool:
    """True when every fp32 probability and partial sum of the row is exact: 2^j equal finite
    logits (each p = 2^-j, exp(0) = 1 and the sum 2^j are exact). There the boundary convention
    (cum >= p or cum > p) is observable, and no rounding allowance may hide it."""
    fin = row[np.isfinite(row)]
    return fin.size > 0 and bool((fin == fin[0]).all()) and (fin.size & (fin.size - 1)) == 0


def descending(row: np.ndarray) -> np.ndarray:
    return descending_order(np.where(np.isfinite(row), row, -np.inf))


def typicality(row: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
    """(p, score |-ln p - H|, H) over the finite entries (score +inf where p = 0)."""
    m = nm.softmax_model(row)
    with np.errstate(divide="ignore", invalid="ignore"):
        nlp = -np.log(m.p)
        h = float(-np.where(m.p > 0, m.p * np.log(m.p), 0.0).sum())
    return m.p, np.where(m.p > 0, np.abs(nlp - h), np.inf), h


def typical_order(row: np.ndarray) -> np.ndarray:
    return ascending_order(typicality(row)[1])


def mass_variants(record_name: str, order_of, param: str = "p", lo: float = -math.inf, hi: float = math.inf):
    """``param`` ± the mass window at the oracle's crossing (none on rows whose masses are exact).

    The window is taken at the crossing position k + 1 and again where p + window moves it."""
    def variants(params: Params, row: np.ndarray) -> list[Params]:
        from properties.samplers.records import RECORDS_BY_NAME

        if exact_masses(row):
            return [params]
        rec = RECORDS_BY_NAME[record_name]
        model = nm.softmax_model(row)
        order = order_of(row)

        def window(probe: Params) -> float:
            k = int(rec.oracle_kept(row, probe).sum())
            return nm.mass_bound(row, order, min(k + 1, row.size), model=model)

        d = window(params)
        d = max(d, window({**params, param: params[param] + d}))
        v = params[param]
        return [params, {**params, param: max(v - d, lo)}, {**params, param: min(v + d, hi)}]
    return variants


def min_p_window(row: np.ndarray, p: float) -> float:
    """Absolute window of the threshold max + ln p in logit space (see the module docstring)."""
    fin = np.isfinite(row)
    m = float(row[fin].max()) if fin.any() else 0.0
    lp = abs(math.log(p))
    logits = 0.0 if p == 1 else U32 * (abs(m - lp) + nm.log_error_u(lp) + 1)
    return max(logits, U32 * (lp + nm.exp_u(lp) + 4))


def min_p_variants(params: Params, row: np.ndarray) -> list[Params]:
    p = params["p"]
    if p <= 0 or p > 1 or not np.isfinite(row).any():
        return [params]
    w = min(min_p_window(row, p), 700.0)  # past e^±700 the variants mean "only the max" / "all"
    # nothing lies above the max: at p = 1 the window only opens downwards
    return [params, {**params, "p": min(p * math.exp(w), 1.0)}, {**params, "p": p * math.exp(-w)}]


def xtc_variants(params: Params, row: np.ndarray) -> list[Params]:
    if exact_masses(row) or not np.isfinite(row).any():
        return [params]
    model = nm.softmax_model(row)
    t = params["threshold"]
    s = float(np.exp(np.where(model.finite, model.d, -np.inf)).sum())
    arg = abs(math.log(max(t * s, 1e-300)))  # |l - max| of a token whose probability is t
    d = t * (U32 * (arg + nm.exp_u(arg) + 2) + model.theta) + U32 * t
    return [params, {**params, "threshold": t - d}, {**params, "threshold": t + d}]


def sigma_key(row: np.ndarray, params: Params) -> tuple[np.ndarray, float]:
    fin = row[np.isfinite(row)]
    if fin.size == 0:
        return row, 0.0
    n = max(params["n"], 0.0)
    mean, sigma = float(fin.mean()), float(fin.std())
    sq = (fin - mean) ** 2
    theta_sq = nm.sum_bound(sq) / sq.sum() if sq.sum() > 0 else 0.0
    dmean = nm.gamma(nm.contract().depth(fin.size)) * float(np.abs(fin).mean()) + U32 * abs(mean)
    rel_sigma = theta_sq / 2 + 3 * U32 + ((dmean / sigma) ** 2 / 2 if sigma > 0 else 0.0)
    thr = float(fin.max()) - n * sigma
    return row, U32 * (abs(float(fin.max())) + abs(thr) + n * sigma) + n * sigma * rel_sigma


def sigma_variants(params: Params, row: np.ndarray) -> list[Params]:
    """The threshold max - n·std moved by ± the key's eps (n ± eps/std): a token within eps of
    the threshold may go either way even when no token lies beyond it (two finite logits with
    n = 2 put the threshold exactly on the smaller one), which tie expansion alone cannot see."""
    fin = row[np.isfinite(row)]
    std = float(fin.std()) if fin.size else 0.0
    if params["n"] <= 0 or std == 0:
        return [params]
    d = sigma_key(row, params)[1] / std
    lower = max(params["n"] - d, 5e-324)  # n <= 0 would switch the filter off, not move its threshold
    return [params, {**params, "n": lower}, {**params, "n": params["n"] + d}]


def typical_key(row: np.ndarray, params: Params) -> tuple[np.ndarray, float]:
    if not np.isfinite(row).any():
        return row, 0.0
    model = nm.softmax_model(row)
    p, score, h = typicality(row)
    normal = model.finite & ~underflowed(row)  # fp32 p in the normal range (the rest: ``properties.ties``' zeros)
    with np.errstate(divide="ignore"):
        lnp = np.where(p > 0, np.log(np.where(p > 0, p, 1.0)), 0.0)
    rho = model.rel()
    dh = nm.entropy_bound(model)
    eps = float((rho[normal] + U32 * nm.log_error_u(lnp[normal])).max()) + dh if normal.any() else 0.0
    key = -score
    below = model.finite & ~normal
    if below.any():  # no precision left in fp32 (p^ may be 0, its score inf): every such token is as
        # typical as every other, and less than any normal one; a finite key, as -inf means "not a candidate"
        floor = float(key[normal].min()) - 2 * eps - 1 if normal.any() else 0.0
        key = np.where(below, floor, key)
    return np.where(model.finite, key, -np.inf), eps


def quotient_bound(row: np.ndarray, params: Params) -> np.ndarray:
    """l / t (or l·r, l / r) per logit: the parameter's rounding to float32 and the division the
    contract accepts (``numerics.quotient_u``: default 5 u, CUDA's -prec-div=false division
    within 2 ulp; strict 2 u)."""
    return np.full(row.size, nm.quotient_u())


def temp_ext_bound(row: np.ndarray, params: Params) -> np.ndarray:
    """Relative error (u) of temp_ext's l / T, T = T_lo + (T_hi - T_lo)·x^e, x = H / ln n, from
    the float32 entropy: x within the entropy's bound (+ the division and logf(n)), x^e over that
    interval (not e·x^(e-1)·dx, unbounded as x -> 0: a near one-hot row whose top p^ rounds to 1
    loses its -p ln p term, ~u, a large part of an H of ~1e-7), the pow itself (powf, or
    exp2(e·log2 x) as __powf: ``numerics.pow_u``), the affine map, the division (the contract's
    quotient, ``quotient_bound``).
    A T that may reach 0 is the argmax-or-divide ambiguity: no bound."""
    t, delta, e = float(params["t"]), float(params["delta"]), float(params["exponent"])
    if delta <= 0 or row.size <= 1:  # plain l / t (or untouched): the contract's quotient
        return quotient_bound(row, params) + U32
    m = nm.softmax_model(row)
    with np.errstate(divide="ignore", invalid="ignore"):
        h = float(-np.where(m.p > 0, m.p * np.log(m.p), 0.0).sum())
    ln_n = math.log(row.size)
    x, dx = h / ln_n, nm.entropy_bound(m) / ln_n + (3 + nm.log_error_u(ln_n) / ln_n) * U32 * h / ln_n
    lo, hi = max(x - dx, 0.0), x + dx
    xe = x**e
    pow_err = max((v**e * nm.pow_u(math.log(v), e) for v in (lo, x, hi) if v > 0), default=0.0)
    dxe = max(hi**e - xe, xe - lo**e) + U32 * pow_err
    t_lo, t_hi = max(0.0, t - delta), t + delta
    span = t_hi - t_lo
    temp = t_lo + span * xe
    d_temp = span * dxe + 3 * U32 * (t_lo + 2 * span * xe + t_hi)
    if temp - d_temp <= 0:
        return np.full(row.size, np.inf)
    return quotient_bound(row, params) + U32 + d_temp / ((temp - d_temp) * U32)


def dist_legal(row: np.ndarray, params: Params) -> np.ndarray:
    """Tokens whose CDF interval (token order) lies within the CDF window of u."""
    model = nm.softmax_model(row)
    cdf = np.cumsum(model.p)
    lo = np.concatenate([[0.0], cdf[:-1]])
    d = nm.cdf_bound(row, model=model)
    return (model.p > 0) & (lo <= params["u"] + d) & (cdf >= params["u"] - d)


def mirostat_v2_variants(params: Params, row: np.ndarray) -> list[Params]:
    """mu ± the surprise window at the cut (-log2 p^ within ρ/ln 2 + log2f's ``log_error_u``, mu's own
    rounding), u ± the CDF window of the survivors' renormalised distribution."""
    model = nm.softmax_model(row)
    mu = params["mu"]
    s = float(np.exp(np.where(model.finite, model.d, -np.inf)).sum())
    d_cut = abs(mu * math.log(2) + math.log(s))  # |l - max| of a token whose surprise is mu
    dm = ((U32 * (d_cut + nm.exp_u(d_cut) + 2) + model.theta) / math.log(2) + U32 * nm.log_error_u(mu * math.log(2), base=2)
          + U32 * abs(mu))
    with np.errstate(divide="ignore"):
        keep = -np.log2(np.where(model.p > 0, model.p, 1e-320)) <= mu + dm
    keep[int(np.argmax(np.where(model.finite, row, -np.inf)))] = True
    du = nm.cdf_bound(np.where(keep & model.finite, row, -np.inf))
    return [{**params, "mu": mu + a, "u": min(max(params["u"] + b, 0.0), 1 - 2**-53)}
            for a in (-dm, 0.0, dm) for b in (-du, 0.0, du)]
