"""Engine variants as parameters of sampler records: ``engine_records(engine)`` builds, for one
engine, a ``SamplerRecord`` per stage whose oracle is that engine's float64 variant
(``oracle.engines``) and whose impl is the matching fixed-shape function (``gpu_impl.engines``).
The generic property bodies (impl ≡ oracle, no-op, monotone, min_keep) then run unchanged.

Boundary allowances (float32 impl against the float64 variant), from the numerics model
(``properties.numerics``) under the active contract, stated per record:
- mass thresholds (top_p): p ± the mass window of the terms the engine accumulates: the kept
  prefix for descending engines, the removed tokens for Hugging Face and vLLM, which sort
  ascending (``_mass``); ties at the boundary interchangeable;
- probability thresholds (min_p, epsilon, eta): the threshold moved by its window at the
  threshold itself (``threshold_window``: |ln p| there, not the row's spread);
- typical: the mass window in typicality order plus llama.cpp typical's score window;
- selections: tokens whose race / Gumbel score is within the score's fp32 rounding of the best.
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np
from hypothesis import strategies as st

from oracle.candidates import TokenDataArray, ascending_order
from oracle.engines import candle as o_candle
from oracle.engines import mistralrs as o_mistralrs
from oracle.engines import transformers as o_hf
from oracle.engines import vllm as o_vllm
from oracle.engines.settings import Settings
from oracle.samplers.base import Empty, Sampler
from properties.backends import Impl, NotCovered, part_of
from properties.engines.selections import Gumbel, Race, gumbel_legal, race_legal, ratio_eps, uniform_rows
from properties.samplers.checks import KEPT_AS_GIVEN
from properties.samplers.record import Params, SamplerRecord
from properties.samplers.records import _dict, _logit_key, _prob
from properties.samplers.windows import exact_masses, quotient_bound, typical_key, typical_order
from properties.numerics import F32_TINY, U32, entropy_bound, exp_u, mass_bound, softmax_model
from properties.samplers.strategies import per_row

_SUB: dict[tuple[str, str], Impl] = {}


def engines_impl(impl: Impl) -> Impl:
    """The ``<impl>.engines`` module on the same backend (NotCovered if the impl has none)."""
    key = (impl.name, impl.backend)
    if key not in _SUB and part_of(impl, "engines") is not None:
        _SUB[key] = Impl(part_of(impl, "engines"), impl.backend)
    if key not in _SUB:
        import importlib
        try:
            module = importlib.import_module(f"{impl.name}.engines")
        except ImportError as exc:
            raise NotCovered(f"{impl.name}.engines is missing ({exc})") from exc
        _SUB[key] = Impl(module, impl.backend)
    return _SUB[key]


class Dense(Sampler):
    """An engine stage over the dense vocab row, as an oracle ``Sampler`` (-inf = removed)."""

    def __init__(self, name: str, fn: Callable[[np.ndarray], np.ndarray]) -> None:
        self.name, self.fn = name, fn

    def apply(self, cur: TokenDataArray) -> None:
        dense = cur.dense_logits(cur.n_vocab or None)
        cur.logits = self.fn(dense)[cur.ids]
        cur.sorted = False


def _stage(name: str, neutral: Callable[[Params], bool], fn: Callable[[np.ndarray, Params], np.ndarray]):
    return lambda p: Empty(name) if neutral(p) else Dense(name, lambda row: fn(row, p))


def _threshold(name: str, form: str, lo: float = 0.0, hi: float = 1.0):
    """The probability threshold ``name`` moved by its fp32 window (``threshold_window``)."""
    def variants(params: Params, row: np.ndarray) -> list[Params]:
        v = params[name]
        if not np.isfinite(row).any() or v <= 0 or exact_masses(row):
            return [params]
        w = min(threshold_window(row, v, form), 700.0)
        return [params, {**params, name: min(max(v * math.exp(w), lo), hi)},
                {**params, name: min(max(v * math.exp(-w), lo), hi)}]
    return variants


def threshold_window(row: np.ndarray, v: float, form: str) -> float:
    """How far (in log space) a float32 engine's decision p^_i >= threshold may sit from the
    exact one, at the threshold itself (not over the row's spread):

    - "ratio" (min_p: p_i >= v·p_max): the ratio's u·(|ln v| + exp_u + 2), v's and the product's
      rounding: 2 u more; the normaliser cancels;
    - "absolute" (epsilon: p_i >= v): p_i's own bound at p = v, u·(|d| + exp_u(d) + 2) + θ with
      d = ln(v·S), plus v's
      rounding (S = Σ exp(l - max), so l - max = ln(v·S) at the threshold);
    - "eta" (p_i >= c = min(v, √v·exp(-H))): as "absolute" at c, plus H^'s error
      (``numerics.entropy_bound``) and 5 u for exp, sqrt and the product; doubled, because the
      variants scale v and the √v branch moves by the square root of that factor.
    """
    def ratio_u(d: float) -> float:  # p_i/p_max at l - max = d: the argument, exp, two divisions
        return abs(d) + exp_u(d) + 2

    if form == "ratio":
        return U32 * (ratio_u(math.log(v)) + 2)
    m = softmax_model(row)
    s = 1.0 / float(m.p.max())
    if form == "absolute":
        return U32 * ratio_u(math.log(v * s)) + m.theta + U32
    h = float(-(m.p[m.p > 0] * np.log(m.p[m.p > 0])).sum())
    c = min(v, math.sqrt(v) * math.exp(-h))
    return 2 * (U32 * ratio_u(math.log(c * s)) + m.theta + entropy_bound(m) + 5 * U32)


def _mass(name: str, record: Callable[[], SamplerRecord], lo: float = 0.0, hi: float = 1.0,
          ascending: bool = False, order_of: Callable[[np.ndarray], np.ndarray] | None = None):
    """``name`` ± the mass window at the crossing: descending engines accumulate the kept
    prefix (k + 1 terms); Hugging Face and vLLM sort ascending and accumulate the *removed*
    tokens up to the cut (n - k + 1 terms), whose float32 sum carries that many roundings."""
    def variants(params: Params, row: np.ndarray) -> list[Params]:
        if exact_masses(row):  # every fp32 probability and partial sum exact: no window
            return [params]
        model = softmax_model(row)
        if order_of is not None:
            order = order_of(row)
        else:
            order = ascending_order(np.where(np.isfinite(row), row, -np.inf))
            order = order if ascending else order[::-1]

        def window(probe: Params) -> float:
            k = int(record().oracle_kept(row, probe).sum())
            terms = row.size - k + 1 if ascending else k + 1
            return mass_bound(row, order, min(terms, row.size), model=model)

        d = window(params)
        d = max(d, window({**params, name: min(params[name] + d, hi)}))
        v = params[name]
        return [params, {**params, name: max(v - d, lo)}, {**params, name: min(v + d, hi)}]
    return variants


def _tags(engine: str, kind: str) -> frozenset[str]:
    """An engine record's tags: its engine, and for a filter "count" (ties choose which tokens
    survive, never how many: ``checks.count_violation``), as the llama.cpp filters'; and
    ``KEPT_AS_GIVEN``: a filter hands its survivors' logits back unchanged, which is judged exactly
    instead of through the implementation's own softmax (an engine module is judged on its own
    functions alone)."""
    return frozenset({engine} | ({"count", KEPT_AS_GIVEN} if kind == "filter" else set()))


def _history(batch: int, vocab: int, max_len: int = 12) -> st.SearchStrategy[np.ndarray]:
    return st.integers(0, max_len).flatmap(lambda h: st.lists(
        st.lists(st.integers(-1, vocab - 1), min_size=h, max_size=h), min_size=batch, max_size=batch)
        .map(lambda x: np.asarray(x, dtype=np.int64).reshape(batch, h)))


def _ids(h: Any) -> tuple[int, ...]:
    return tuple(int(t) for t in np.asarray(h).ravel() if t >= 0)


def _mk(b: int) -> st.SearchStrategy[np.ndarray]:
    return per_row(st.sampled_from([1, 1, 2, 3]), b, np.int64)


def _hf_records() -> list[SamplerRecord]:
    by: dict[str, SamplerRecord] = {}

    def hf(stage, kind, params, impl, neutral, fn, **kw) -> SamplerRecord:
        rec = SamplerRecord(name=f"transformers.{stage}", kind=kind, impl_name=f"hf_{stage}",
                            oracle=_stage(f"hf-{stage}", neutral, fn), params=params, impl=impl,
                            tags=_tags("engine:transformers", kind), **kw)
        by[stage] = rec
        return rec

    return [
        hf("temperature", "transform", lambda b, v: _dict(t=per_row(_prob((1.0, 0.8, 2.0), 0.05, 4.0), b)),
           lambda i, x, p: engines_impl(i)("hf_temperature", x, p["t"]), lambda p: False,
           lambda r, p: o_hf.temperature(r, p["t"]), transform_bound_u=quotient_bound,
           allowance="the contract's quotient per logit (default 5 u: t rounded to fp32, a -prec-div=false "
                     "division within 2 ulp; strict 2 u)"),
        hf("repetition_penalty", "transform",
           lambda b, v: _dict(history=_history(b, v), r=per_row(_prob((1.0, 1.1, 0.5), 0.2, 3.0), b)),
           lambda i, x, p: engines_impl(i)("hf_repetition_penalty", x, p["history"], p["r"]),
           lambda p: False, lambda r, p: o_hf.repetition_penalty(r, _ids(p["history"]), p["r"]),
           transform_bound_u=quotient_bound,
           allowance="the contract's quotient per logit (default 5 u: r rounded to fp32, l·r or a -prec-div=false "
                     "l / r; strict 2 u); prompt + output, no window"),
        hf("top_k", "filter",
           lambda b, v: _dict(k=per_row(st.one_of(st.sampled_from([1, 2, 40, v]), st.integers(1, max(v, 1))), b, np.int64),
                              min_keep=_mk(b)),
           lambda i, x, p: engines_impl(i)("hf_top_k", x, p["k"], p["min_keep"]), lambda p: False,
           lambda r, p: o_hf.top_k(r, p["k"], p["min_keep"]), monotone=(("k", +1, 1),), min_keep=True,
           boundary=lambda k, m: {"k": m, "min_keep": 1},
           allowance="none: every token tied with the k-th logit is kept (exact comparisons of fp32 inputs)"),
        hf("top_p", "filter",
           lambda b, v: _dict(p=per_row(_prob((0.0, 0.5, 0.9, 0.95, 1.0), 0.0, 1.0), b), min_keep=_mk(b)),
           lambda i, x, p: engines_impl(i)("hf_top_p", x, p["p"], p["min_keep"]), lambda p: p["p"] >= 1.0,
           lambda r, p: o_hf.top_p(r, p["p"], p["min_keep"]), variants=_mass("p", lambda: by["top_p"], ascending=True),
           key=_logit_key, noop=({"p": 1.0, "min_keep": 1},), monotone=(("p", +1, 0.0),), min_keep=True,
           boundary=lambda k, m: {"p": m / k, "min_keep": 1},
           allowance="p ± the mass window of the n - k + 1 removed tokens it accumulates ascending (each p_i within "
                     "u·(|l_i - max| + 6) + θ, their float32 sum within its order-free bound); equal logits at "
                     "the boundary interchangeable (torch.sort is unstable)"),
        hf("min_p", "filter",
           lambda b, v: _dict(p=per_row(_prob((0.0, 0.05, 0.1, 0.5, 1.0), 0.0, 1.0), b), min_keep=_mk(b)),
           lambda i, x, p: engines_impl(i)("hf_min_p", x, p["p"], p["min_keep"]), lambda p: p["p"] <= 0.0,
           lambda r, p: o_hf.min_p(r, p["p"], p["min_keep"]), variants=_threshold("p", "ratio"), key=_logit_key,
           noop=({"p": 0.0, "min_keep": 1},), monotone=(("p", -1, 0.0),), min_keep=True,
           boundary=lambda k, m: {"p": 1.0, "min_keep": 1},
           allowance="threshold min_p·p_max moved by exp(±u·(|ln min_p| + 8)): the ratio p_i/p_max at the "
                     "threshold, whatever the row's spread"),
        hf("typical", "filter",
           lambda b, v: _dict(p=per_row(_prob((0.2, 0.5, 0.9, 0.95), 0.01, 0.99), b), min_keep=_mk(b)),
           lambda i, x, p: engines_impl(i)("hf_typical", x, p["p"], p["min_keep"]), lambda p: False,
           lambda r, p: o_hf.typical(r, p["p"], p["min_keep"]), variants=_mass("p", lambda: by["typical"], 1e-12, 1 - 1e-12, order_of=typical_order),
           key=typical_key, monotone=(("p", +1, 0.01),), min_keep=True,
           allowance="the mass window in typicality order, and llama.cpp typical's score window"),
        hf("epsilon", "filter",
           lambda b, v: _dict(eps=per_row(_prob((1e-4, 3e-4, 0.01, 0.1), 1e-5, 0.5), b), min_keep=_mk(b)),
           lambda i, x, p: engines_impl(i)("hf_epsilon", x, p["eps"], p["min_keep"]), lambda p: False,
           lambda r, p: o_hf.epsilon(r, p["eps"], p["min_keep"]), variants=_threshold("eps", "absolute", 1e-300, 1 - 1e-12),
           key=_logit_key, monotone=(("eps", -1, 1e-5),), min_keep=True,
           boundary=lambda k, m: {"eps": min(1 / k, 0.5), "min_keep": 1},
           allowance="threshold eps moved by exp(±(u·(|ln(eps·S)| + 7) + θ)): p_i's own bound at p = eps"),
        hf("eta", "filter",
           lambda b, v: _dict(eps=per_row(_prob((3e-4, 2e-3, 0.01, 0.1), 1e-5, 0.5), b), min_keep=_mk(b)),
           lambda i, x, p: engines_impl(i)("hf_eta", x, p["eps"], p["min_keep"]), lambda p: False,
           lambda r, p: o_hf.eta(r, p["eps"], p["min_keep"]), variants=_threshold("eps", "eta", 1e-300, 1 - 1e-12),
           key=_logit_key, monotone=(("eps", -1, 1e-5),), min_keep=True,
           allowance="as epsilon at the cut c = min(eps, √eps·exp(-H)), plus H's fp32 error; doubled (eps scales, √eps moves by half)"),
    ]


def _vllm_records() -> list[SamplerRecord]:
    by: dict[str, SamplerRecord] = {}

    def topkp_variants(params: Params, row: np.ndarray) -> list[Params]:
        return _mass("p", lambda: by["tkp"], ascending=True)(params, row)

    def pen_bound(row: np.ndarray, p: Params) -> np.ndarray:
        c_out = np.bincount(np.asarray(_ids(p["output"]), dtype=np.int64), minlength=row.size)[: row.size]
        seen = (c_out + np.bincount(np.asarray(_ids(p["prompt"]), dtype=np.int64), minlength=row.size)[: row.size]) > 0
        scaled = np.where(seen, np.maximum(np.abs(row) * p["r"], np.abs(row) / p["r"]), np.abs(row))
        exact = o_vllm.penalties(row, _ids(p["prompt"]), _ids(p["output"]), p["r"], p["f"], p["pr"])
        terms = scaled + c_out * abs(p["f"]) + (c_out > 0) * abs(p["pr"])
        with np.errstate(invalid="ignore", divide="ignore"):
            ratio = terms / np.maximum(np.abs(exact), np.finfo(np.float32).tiny)
        return np.where(np.isfinite(ratio), 4 * ratio, 0.0) + 2

    tkp = SamplerRecord(
        name="vllm.top_k_top_p", kind="filter", impl_name="vllm_top_k_top_p",
        oracle=_stage("vllm-top-k-top-p", lambda p: not (0 < p["k"] < p["n_vocab"]) and p["p"] >= 1,
                      lambda r, p: o_vllm.top_k_top_p(r, p["k"], p["p"])),
        params=lambda b, v: _dict(k=per_row(st.sampled_from([-1, 0, 1, 2, 40, v]), b, np.int64),
                                  p=per_row(_prob((0.5, 0.9, 0.95, 1.0), 0.0, 1.0), b)),
        impl=lambda i, x, p: engines_impl(i)("vllm_top_k_top_p", x, p["k"], p["p"]),
        variants=topkp_variants, key=_logit_key, noop=({"k": -1, "p": 1.0}, {"k": 0, "p": 1.0}),
        tags=_tags("engine:vllm", "filter"), boundary=lambda k, m: {"k": -1, "p": m / k},
        allowance="top_k exact (ties kept); top_p ± the mass window of the removed tokens accumulated ascending, "
                  "boundary ties interchangeable")
    by["tkp"] = tkp
    return [
        tkp,
        SamplerRecord(
            name="vllm.min_p", kind="filter", impl_name="vllm_min_p",
            oracle=_stage("vllm-min-p", lambda p: p["p"] <= 0, lambda r, p: o_vllm.min_p(r, p["p"])),
            params=lambda b, v: _dict(p=per_row(_prob((0.0, 0.05, 0.1, 0.5, 1.0), 0.0, 1.0), b)),
            impl=lambda i, x, p: engines_impl(i)("vllm_min_p", x, p["p"]), variants=_threshold("p", "ratio"),
            key=_logit_key, noop=({"p": 0.0},), monotone=(("p", -1, 0.0),), tags=_tags("engine:vllm", "filter"),
            boundary=lambda k, m: {"p": 1.0},
            allowance="as transformers.min_p; no min_tokens_to_keep"),
        SamplerRecord(
            name="vllm.penalties", kind="transform", impl_name="vllm_penalties",
            oracle=_stage("vllm-penalties", lambda p: False,
                          lambda r, p: o_vllm.penalties(r, _ids(p["prompt"]), _ids(p["output"]), p["r"], p["f"], p["pr"])),
            params=lambda b, v: _dict(prompt=_history(b, v), output=_history(b, v),
                                      r=per_row(_prob((1.0, 1.1, 0.5), 0.2, 3.0), b),
                                      f=per_row(_prob((0.0, 0.5, -1.0), -2.0, 2.0), b),
                                      pr=per_row(_prob((0.0, 0.25), -2.0, 2.0), b)),
            impl=lambda i, x, p: engines_impl(i)("vllm_penalties", x, p["prompt"], p["output"], p["r"], p["f"], p["pr"]),
            transform_bound_u=pen_bound, tags=frozenset({"engine:vllm"}),
            allowance="4 u of (|l|·max(r, 1/r) + c·|f| + |pr|) relative to the result, + 2 u for the fp32 parameters"),
        SamplerRecord(
            name="vllm.race", kind="select", impl_name="vllm_sample",
            oracle=lambda p: Race(p["u"]), params=lambda b, v: _dict(u=uniform_rows(b, v)),
            impl=lambda i, x, p: engines_impl(i)("vllm_sample", x, p["u"]), legal=race_legal,
            tags=frozenset({"engine:vllm"}),
            allowance="tokens whose p/q is within a factor 1 ± 4·u32·(spread + log2 n + 8) of the best"),
    ]


def _candle_records() -> list[SamplerRecord]:
    return [
        SamplerRecord(
            name="candle.repeat_penalty", kind="transform", impl_name="candle_repeat_penalty",
            oracle=_stage("candle-repeat-penalty", lambda p: False,
                          lambda r, p: o_candle.repeat_penalty(r, _ids(p["history"]), p["r"], p["last_n"])),
            params=lambda b, v: _dict(history=_history(b, v), r=per_row(_prob((1.0, 1.1, 0.5), 0.2, 3.0), b),
                                      last_n=per_row(st.sampled_from([0, 1, 3, 64]), b, np.int64)),
            impl=lambda i, x, p: engines_impl(i)("candle_repeat_penalty", x, p["history"], p["r"], p["last_n"]),
            transform_bound_u=quotient_bound, tags=_tags("engine:candle", "transform"),
            allowance="the contract's quotient per logit (default 5 u, strict 2 u: r rounded to fp32, l·r or l / r); "
                      "the last last_n ids of the "
                      "history (padding -1 left out), 0 = no window"),
        SamplerRecord(
            name="candle.gumbel", kind="select", impl_name="candle_sample",
            oracle=lambda p: Gumbel(p["t"], p["u"]),
            params=lambda b, v: _dict(t=per_row(_prob((1.0, 0.8, 0.0, 2.0), 0.05, 4.0), b), u=uniform_rows(b, v)),
            impl=lambda i, x, p: engines_impl(i)("candle_sample", x, p["t"], p["u"]), legal=gumbel_legal,
            tags=frozenset({"engine:candle"}),
            allowance="tokens whose l + T·g is within 8·u32·(max|l| + T·(max|g| + 1000)) of the best: U is rounded "
                      "to fp32 near 0.999, where dg/dU ≈ 1000"),
    ]


def _mistralrs_settings(p: Params) -> Settings:
    return Settings(output=_ids(p["history"]), repetition_penalty=p["r"], frequency_penalty=p["f"],
                    presence_penalty=p["pr"], temperature=p["t"], top_k=p["k"], top_p=p["p"], min_p=p["m"])


def _mistralrs_seen(row: np.ndarray, p: Params) -> tuple[np.ndarray, float]:
    """The row mistral.rs truncates (penalised, divided by t; float64) and how far its float32
    computation may sit from it, in logit units: the penalties' roundings (4 u of
    |l|·max(r, 1/r) + c·|f| + |pr|, as vllm.penalties' model) and one of the division by t."""
    s = _mistralrs_settings(p)
    y = o_mistralrs.penalised(row, s)
    c = np.bincount(np.asarray(_ids(p["history"]), dtype=np.int64), minlength=row.size)[: row.size]
    fin = np.isfinite(row)
    scale = max(p["r"], 1 / p["r"]) if p["r"] > 0 else 1.0
    terms = np.abs(np.where(fin, row, 0)) * scale + c * abs(p["f"]) + (c > 0) * abs(p["pr"])
    err = 4 * U32 * float(terms.max(initial=0.0)) + 2 * U32 * float(np.abs(np.where(fin, y, 0)).max(initial=0.0))
    t = p["t"] if p["t"] > 0 else 1.0
    return y / t, err / t


def _mistralrs_records() -> list[SamplerRecord]:
    """mistral.rs' ``mistralrs_weights`` as a filter (its survivors: weight > 0) over its whole
    domain: a history with repetition, frequency and presence penalties, temperatures (0: greedy,
    one-hot at the first maximum), top_k, top_p, min_p. The windows are taken on the row the
    truncation sees (penalised, / t), widened by that row's own float32 error."""
    by: dict[str, SamplerRecord] = {}

    def variants(params: Params, row: np.ndarray) -> list[Params]:
        y, err = _mistralrs_seen(row, params)
        if params["t"] <= 0 or exact_masses(y):
            return [params]
        order = ascending_order(np.where(np.isfinite(y), y, -np.inf))[::-1]
        k = int(by["t"].oracle_kept(row, params).sum())
        # a logit error δ moves each p_i by at most p_i·2δ: the kept mass by 2δ at most. The cut
        # compares the running sum B with p·S, S the top-k mass (itself a float32 sum of kk terms):
        # it flips only where |B/S - p| <= (e_B + p·e_S)/S
        d = 0.0
        if 0 < params["p"] < 1:
            model = softmax_model(y)
            kk = int(params["k"]) if 0 < int(params["k"]) < y.size else y.size
            s_k = float(np.sort(model.p)[::-1][:kk].sum())
            e_b = mass_bound(y, order, min(k + 2, y.size), model=model) + 2 * err
            e_s = mass_bound(y, order, kk, model=model) + 2 * err
            d = (e_b + params["p"] * e_s) / s_k
        e = math.exp(min(threshold_window(y, params["m"], "ratio") + 2 * err, 700.0)) if 0 < params["m"] < 1 else 1.0
        # float32 weights below the smallest normal may underflow to 0 (flushed on a GPU): such a
        # token may be dropped, never must be kept
        return [params, {**params, "p": params["p"] - d, "m": min(params["m"] * e, 1.0),
                         "underflow": F32_TINY * math.exp(min(ratio_eps(y, err / (4 * U32)), 80.0))},
                {**params, "p": params["p"] + d, "m": params["m"] / e}]

    def key(row: np.ndarray, params: Params) -> tuple[np.ndarray, float]:
        y, err = _mistralrs_seen(row, params)
        return y, ratio_eps(y, err / (4 * U32))

    def fn(r: np.ndarray, p: Params) -> np.ndarray:
        w = o_mistralrs.weights(r, _mistralrs_settings(p))
        return np.where(w > p.get("underflow", 0.0), r, -np.inf)

    def impl(i: Impl, x: np.ndarray, p: Params) -> np.ndarray:
        w = engines_impl(i)("mistralrs_weights", x, p["history"], p["r"], p["f"], p["pr"], p["t"], p["k"], p["p"], p["m"])
        return np.where(np.asarray(w) > 0, x.astype(np.float32), np.float32(-np.inf))

    rec = SamplerRecord(
        name="mistral.rs.truncate", kind="filter", impl_name="mistralrs_weights",
        oracle=_stage("mistralrs-truncate", lambda p: False, fn),
        params=lambda b, v: _dict(history=_history(b, v), r=per_row(_prob((1.0, 1.1, 0.5), 0.2, 3.0), b),
                                  f=per_row(_prob((0.0, 0.5, -1.0), -2.0, 2.0), b),
                                  pr=per_row(_prob((0.0, 0.25), -2.0, 2.0), b),
                                  t=per_row(_prob((1.0, 0.8, 0.0, 1.5), 0.05, 4.0), b),
                                  k=per_row(st.sampled_from([0, 1, 2, 40, v]), b, np.int64),
                                  p=per_row(_prob((0.5, 0.9, 0.95, 1.0), 0.0, 1.0), b),
                                  m=per_row(_prob((0.0, 0.05, 0.1), 0.0, 0.9), b)),
        impl=impl, variants=variants, key=key, tags=_tags("engine:mistral.rs", "filter"),
        boundary=lambda k, m: {"history": np.full(1, -1), "r": 1.0, "f": 0.0, "pr": 0.0, "t": 1.0, "k": 0,
                               "p": m / k, "m": 0.0},
        allowance="on the row it truncates (penalties, then / t: its own float32 error δ in logits): tokens "
                  "ranked by fp32 probability, so values within 4·u32·(spread + log2 n + 8) + δ are "
                  "interchangeable; top_p on the renormalised top-k mass ± (the kept prefix's mass window + p × the "
                  "top-k sum's, each + 2δ) / the top-k mass, "
                  "min_p threshold as transformers.min_p widened by exp(2δ) (equality removed); t = 0: the "
                  "first maximum, ties within the same width")
    by["t"] = rec
    return [rec]


# one entry per engine variant of ``oracle.engines.ENGINES`` (llama.cpp's records are the
# catalogue's own); properties/meta/test_catalogue.py checks the two name the same engines
_BUILD = {o_hf.NAME: _hf_records, o_vllm.NAME: _vllm_records, o_mistralrs.NAME: _mistralrs_records,
          o_candle.NAME: _candle_records,
          # MLX's variant has no fixed-shape counterpart in gpu_impl: it is judged against the real
          # mlx-lm instead (properties/peers/mlx)
          "mlx": lambda: []}
ENGINE_NAMES = tuple(_BUILD)


def engine_records(engine: str) -> list[SamplerRecord]:
    """The records of one engine variant (llama.cpp's are the catalogue's own)."""
    if engine not in _BUILD:
        raise ValueError(f"no engine records for {engine!r}; known: {sorted(_BUILD)}")
    return _BUILD[engine]()


ENGINE_RECORDS: list[SamplerRecord] = [r for e in ENGINE_NAMES for r in engine_records(e)]
