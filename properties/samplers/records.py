"""The sampler catalogue: one record per sampler, every role it plays as a typed facet of it.

Each record states its boundary allowance (``allowance``) in words. Parameters come in two
shapes: llama.cpp's constructor parameters (``build``, the one oracle factory, and every facet
that names a sampler to llama.cpp) and the impl's per-row arrays (``params``; ``oracle`` maps one
row of them to constructor parameters where the two differ). Every per-sampler table elsewhere
is derived from this list; ``record_named`` raises on a name that is no record.
"""
from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from oracle import samplers as s
from oracle.rng import Replay
from properties.peers.llama_cpp import adapter as peer
from properties.peers.llama_cpp.legal_filters import (_dry_tol, _greedy, _logit_bias as _legal_bias, _min_p, _penalty_tol,
                                            _temp_ext, _top_k, _top_n_sigma, _top_p, _transform, _typical, _xtc)
from properties.peers.llama_cpp.legal_select import (_adaptive_p as _legal_adaptive_p, _dist as _legal_dist,
                                           _mirostat as _legal_mirostat, _mirostat_v2 as _legal_mirostat_v2)
from properties.samplers import corners as c, windows as w
from properties.samplers.record import ChainRole, LlamaRole, OrderRole, Params, SamplerRecord
from properties.samplers.stateful import judge_mu
from properties.ties import logit_classes, prob_classes
from properties.samplers.strategies import (NO_UNDERFLOW, SORTABLE, dry_breakers, f32, floats32, peer_seed, per_row,
                                            token_history)


def _dict(**strategies: st.SearchStrategy) -> st.SearchStrategy[Params]:
    return st.fixed_dictionaries(strategies)


def _prob(special: tuple[float, ...], lo: float, hi: float) -> st.SearchStrategy[float]:
    return st.one_of(st.sampled_from(special), floats32(lo, hi))


def _logit_key(row: np.ndarray, params: Params) -> tuple[np.ndarray, float]:
    return row, 0.0


# ---- the oracle factories: llama.cpp's constructor parameters -> an oracle sampler -------------

def _make_dist(p: Params, v: int) -> s.Sampler:
    return s.dist(p["seed"])


def _make_xtc(p: Params, v: int) -> s.Sampler:
    return s.xtc(p["probability"], p["threshold"], p["min_keep"], p["seed"])


def _make_bias(p: Params, v: int) -> s.Sampler:
    return s.logit_bias(v, p["biases"])


def _make_penalties(p: Params, v: int) -> s.Sampler:
    return s.penalties(p["last_n"], p["repeat"], p["freq"], p["present"])


def _make_mirostat_v2(p: Params, v: int) -> s.Sampler:
    return s.mirostat_v2(p["seed"], p["tau"], p["eta"])


def _make_dry(p: Params, v: int) -> s.Sampler:
    return s.dry(p["multiplier"], p["base"], p["allowed_length"], p["last_n"], p["breakers"])


def _make_mirostat(p: Params, v: int) -> s.Sampler:
    return s.mirostat(v, p["seed"], p["tau"], p["eta"], p["m"])


def _make_adaptive_p(p: Params, v: int) -> s.Sampler:
    return s.adaptive_p(p["target"], p["decay"], p["seed"])


# ---- the impl's per-row parameters (one row) -> the oracle, through the factories above -------

def _dist_oracle(p: Params) -> s.Sampler:
    return _replayed(_make_dist({"seed": 0}, 0), doubles=[p["u"]])


def _xtc_oracle(p: Params) -> s.Sampler:
    smp = _make_xtc({**p, "seed": 0}, 0)
    if hasattr(smp, "rng"):
        smp.rng = Replay(floats=[p["chance"]])
    return smp


def _bias_pairs(p: Params) -> list[tuple[int, float]]:
    return [(int(t), float(b)) for t, b in zip(p["bias_ids"], p["bias_vals"]) if t >= 0]


def _bias_bound(row: np.ndarray, p: Params) -> np.ndarray:
    pairs = _bias_pairs(p)
    ids = np.array([t for t, _ in pairs], dtype=np.int64)
    vals = np.array([b for _, b in pairs])
    count = np.bincount(ids, minlength=row.size).astype(float)
    mags = np.bincount(ids, np.abs(vals), minlength=row.size)
    exact = row + np.bincount(ids, vals, minlength=row.size)
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = (np.abs(row) + mags) / np.maximum(np.abs(exact), np.finfo(np.float32).tiny)
    return np.where(np.isfinite(ratio), (count + 1) * ratio, 0.0) + 1


def _dense_bias(params: Params, batch: int, vocab: int) -> np.ndarray:
    dense = np.zeros((batch, vocab), dtype=np.float32)
    for b in range(batch):
        for t, v in zip(params["bias_ids"][b], params["bias_vals"][b]):
            if t >= 0:
                dense[b, t] += np.float32(v)
    return dense


def _bias_oracle(p: Params) -> s.Sampler:
    return _make_bias({"biases": _bias_pairs(p)}, p["n_vocab"])


def _penalties_oracle(p: Params) -> s.Sampler:
    smp = _make_penalties(p, 0)
    for t in p["history"]:
        if t >= 0:
            smp.accept(int(t))
    return smp


def _penalties_bound(row: np.ndarray, p: Params) -> np.ndarray:
    """~4 roundings, each relative to the magnitudes of the terms, over the exact result."""
    hist = [t for t in p["history"] if t >= 0][-p["last_n"]:] if p["last_n"] > 0 else []
    c = np.bincount(np.asarray(hist, dtype=np.int64), minlength=row.size)[: row.size] if hist else np.zeros(row.size)
    scaled = np.where(row <= 0, row * p["repeat"], row / p["repeat"])
    exact = np.where(c > 0, scaled - c * p["freq"] - (c > 0) * p["present"], row)
    terms = np.abs(scaled) + c * abs(p["freq"]) + (c > 0) * abs(p["present"])
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = terms / np.maximum(np.abs(exact), np.finfo(np.float32).tiny)
    return np.where(np.isfinite(ratio), 4 * ratio, 0.0) + 1


def _penalty_params(batch: int, vocab: int) -> st.SearchStrategy[Params]:
    hist_len = st.integers(0, 12)
    return hist_len.flatmap(lambda h: _dict(
        history=st.lists(st.lists(st.integers(-1, vocab - 1), min_size=h, max_size=h),
                         min_size=batch, max_size=batch).map(lambda x: np.asarray(x, dtype=np.int64).reshape(batch, h)),
        last_n=per_row(st.sampled_from([0, 1, 3, 8, 64]), batch, np.int64),
        repeat=per_row(_prob((1.0, 1.1, 50.0, 0.5), 0.2, 3.0), batch),
        freq=per_row(_prob((0.0, 0.5, -1.0), -2.0, 2.0), batch),
        present=per_row(_prob((0.0, 0.25, 1.0), -2.0, 2.0), batch),
    ))


def _bias_params(batch: int, vocab: int) -> st.SearchStrategy[Params]:
    m = 4
    return _dict(
        bias_ids=st.lists(st.lists(st.integers(-1, vocab - 1), min_size=m, max_size=m), min_size=batch, max_size=batch)
        .map(lambda x: np.asarray(x, dtype=np.int64)),
        bias_vals=st.lists(st.lists(st.one_of(floats32(-30, 30), st.just(-math.inf)), min_size=m, max_size=m),
                           min_size=batch, max_size=batch).map(lambda x: np.asarray(x, dtype=np.float64)),
    )


def _temp_ext_params(batch: int, vocab: int) -> st.SearchStrategy[Params]:
    # delta < t keeps the dynamic temperature > 0: at T -> 0 the fp32 entropy of a one-hot row
    # rounds to exactly 0 and the choice "argmax mask vs l/tiny" is legitimately ambiguous.
    row = floats32(0.1, 3.0).flatmap(
        lambda t: st.tuples(st.just(t), st.one_of(st.just(0.0), floats32(0.0, 0.9 * t)),
                            st.sampled_from([0.5, 1.0, 2.0])))
    return st.lists(row, min_size=batch, max_size=batch).map(lambda rows: {
        "t": np.array([r[0] for r in rows]), "delta": np.array([r[1] for r in rows]),
        "exponent": np.array([r[2] for r in rows])})


def _greedy_legal(row: np.ndarray, p: Params) -> np.ndarray:
    legal = np.zeros(row.size, dtype=bool)
    legal[int(np.argmax(row))] = True
    return legal


def _mirostat_v2_oracle(p: Params) -> s.Sampler:
    smp = _make_mirostat_v2({"seed": 0, "tau": p["tau"], "eta": p["eta"]}, 0)
    smp.mu, smp.rng = p["mu"], Replay(doubles=[p["u"]])
    return smp


# ---- facet strategies ------------------------------------------------------------------------

_EIGHTHS = st.integers(-8, 8).map(lambda i: i / 8)  # fp32-exact chain parameters
_BACKEND_EIGHTHS = st.integers(-16, 16).map(lambda i: i / 8)
_KEEP = st.sampled_from([0, 1, 3])


def _exact_penalties(v: int) -> st.SearchStrategy[Params]:
    return st.integers(0, 6).flatmap(lambda h: _dict(
        history=st.lists(st.integers(0, v - 1), min_size=h, max_size=h), last_n=st.sampled_from([0, 3, 64]),
        repeat=st.sampled_from([0.5, 1.0, 2.0]), freq=_EIGHTHS, present=_EIGHTHS))


def _exact_bias(v: int) -> st.SearchStrategy[Params]:
    return _dict(bias_ids=st.lists(st.integers(0, v - 1), min_size=4, max_size=4),
                  bias_vals=st.lists(st.one_of(st.integers(-32, 32).map(lambda i: i / 8), st.just(-np.inf)),
                                     min_size=4, max_size=4))


def _order_temps(exact: bool) -> st.SearchStrategy[float]:
    return st.sampled_from([0.25, 0.5, 2.0, 4.0]) if exact else floats32(0.1, 4.0)


def _mass(name: str, lo: float, hi: float) -> OrderRole:
    """top_p / min_p / typical in the order matrix: p in [lo, hi] under the sampler's own name."""
    return OrderRole(lambda exact: {name: floats32(lo, hi)}, lambda p, v: {"p": p[name], "min_keep": 0})


def _keep_p(*special: float) -> st.SearchStrategy[Params]:
    return _dict(p=f32(0.0, 1.0, *special), min_keep=_KEEP)


_CALL_P = "({p}, {min_keep})"

# The number of survivors lies within the counts of the oracle runs at the variants: a tie of
# equal logits chooses *which* tokens survive, never how many (they form a prefix of an order, or
# all pass a threshold on the logit together). Not top_n_sigma, whose near-tie allowance is
# threshold rounding outside the variants: there a tied group may go either way.
COUNT_FIXED = frozenset({"count"})

RECORDS: list[SamplerRecord] = [
    SamplerRecord(
        name="greedy", kind="select", impl_name="greedy", build=lambda p, v: s.greedy(),
        params=lambda b, v: st.just({}), impl=lambda impl, x, p: impl("greedy", x),
        variants=lambda p, row: [p], key=None, allowance="none: the first maximal logit, exactly",
        tags=frozenset({"legal:greedy"}), corner=lambda v: {},
        llama=LlamaRole("greedy", lambda v: st.just({}), lambda p, v: peer.greedy(), _greedy, backend=True,
                        call="L.llama_sampler_init_greedy()")),
    SamplerRecord(
        name="dist", kind="select", impl_name="dist", build=_make_dist, oracle=_dist_oracle,
        params=lambda b, v: _dict(u=per_row(st.floats(0, 1, exclude_max=True), b)),
        impl=lambda impl, x, p: impl("dist", x, p["u"]),
        allowance="the token whose CDF interval (token order) contains u; a neighbour when u is within "
                  "the CDF window: the weights' 2u·(max|l - max| + exp_u + 2), the normaliser θ and a scan in an "
                  "order the contract accepts for a CDF (default: blocked over 1,024 threads or better)",
        legal=w.dist_legal, corner=lambda v: {"u": 0.3}, cut=c.dist_cut,
        llama=LlamaRole("dist", lambda v: _dict(seed=peer_seed()), lambda p, v: peer.dist(p["seed"]), _legal_dist,
                        stream="own", stream_params={"seed": 7}, backend=True,
                        call="L.llama_sampler_init_dist({seed})")),
    SamplerRecord(
        name="temp", kind="transform", impl_name="temp", build=lambda p, v: s.temp(p["t"]),
        params=lambda b, v: _dict(t=per_row(_prob((1.0, 0.0, -1.0, 0.8, 0.1, 2.0), 0.05, 4.0), b)),
        impl=lambda impl, x, p: impl("temp", x, p["t"]),
        transform_bound_u=w.quotient_bound, noop=({"t": 1.0},),
        allowance="the contract's quotient per logit: 5 u by default (t rounded to fp32, CUDA's -prec-div=false "
                  "division within 2 ulp), strict 2 u (l / t or l·(1/t) rounded); t <= 0 masks exactly",
        corner=lambda v: {"t": 0.7},
        chain=ChainRole(lambda v: _dict(t=st.sampled_from([0.25, 0.5, 1.0, 2.0, 4.0])), default=True, position=9),
        order=OrderRole(lambda exact: {"t": _order_temps(exact)}, lambda p, v: {"t": p["t"]}),
        llama=LlamaRole("temp", lambda v: _dict(t=f32(0.05, 4.0, 1.0, 0.0, -1.0, 0.8)), lambda p, v: peer.temp(p["t"]),
                        _transform(), backend=True, backend_chain="prefix",
                        backend_params=lambda v: _dict(t=st.sampled_from([-1.0, 0.0, 0.25, 0.5, 1.0, 2.0, 4.0])),
                        call="L.llama_sampler_init_temp({t})")),
    SamplerRecord(
        name="temp_ext", kind="transform", impl_name="temp_ext",
        build=lambda p, v: s.temp_ext(p["t"], p["delta"], p["exponent"]), params=_temp_ext_params,
        impl=lambda impl, x, p: impl("temp_ext", x, p["t"], p["delta"], p["exponent"]),
        transform_bound_u=w.temp_ext_bound, noop=({"t": 1.0, "delta": 0.0, "exponent": 1.0},),
        masked_are_candidates=False,
        families=("peaked", "flat", "zipf", "plateaus", "near_ties", "one_finite"),
        allowance="4 u plus the fp32 entropy error (log2 n + 12 + logit spread) u, amplified by "
                  "(exponent + 1)·(max_t - min_t)/min_t through the dynamic temperature. Judged against "
                  "the oracle on the array without -inf entries: llama.cpp's ln(size) counts -inf "
                  "candidates, so its own result differs between a truncated and a masked chain",
        corner=lambda v: {"t": 1.0, "delta": 0.5, "exponent": 1.0},
        llama=LlamaRole("temp-ext", lambda v: f32(0.1, 3.0).flatmap(lambda t: _dict(
                            t=st.just(t), delta=f32(0.0, 0.9 * t, 0.0), exponent=f32(0.25, 3.0, 1.0))),
                        lambda p, v: peer.temp_ext(p["t"], p["delta"], p["exponent"]), _temp_ext,
                        families=("peaked", "flat", "zipf", "plateaus", "near_ties", "one_finite"), sorts=True,
                        backend=True, call="L.llama_sampler_init_temp_ext({t}, {delta}, {exponent})", letter="t",
                        settings=lambda q: {"t": q.temp, "delta": q.dynatemp_range, "exponent": q.dynatemp_exponent})),
    SamplerRecord(
        name="top_k", kind="filter", impl_name="top_k", build=lambda p, v: s.top_k(p["k"]),
        params=lambda b, v: _dict(k=per_row(st.one_of(st.sampled_from([-1, 0, 1, 2, 40, v, v + 3]),
                                                      st.integers(1, max(v, 1))), b, np.int64)),
        impl=lambda impl, x, p: impl("top_k", x, p["k"]), key=_logit_key, ties=logit_classes,
        noop=({"k": 0}, {"k": -5}), monotone=(("k", +1, 1),),
        tags=COUNT_FIXED,
        allowance="none beyond ties: tokens equal to the k-th logit are interchangeable, their count is not",
        corner=lambda v: {"k": 3}, cut=c.top_k_cut, chain=ChainRole(default=True, position=4),
        order=OrderRole(lambda exact: {"k": st.integers(1, 8)}, lambda p, v: {"k": p["k"]}),
        llama=LlamaRole("top-k", lambda v: _dict(k=st.one_of(st.sampled_from([-1, 0, 1, 40, v, v + 3]), st.integers(1, v))),
                        lambda p, v: peer.top_k(p["k"]), _top_k, sorts=True, backend=True, backend_chain="prefix",
                        backend_params=lambda v: _dict(k=st.one_of(st.sampled_from([-1, 0, 1, 2, 40, v, v + 3]),
                                                                    st.integers(1, v))),
                        call="L.llama_sampler_init_top_k({k})", letter="k", settings=lambda q: {"k": q.top_k})),
    SamplerRecord(
        name="top_p", kind="filter", impl_name="top_p", build=lambda p, v: s.top_p(p["p"], p["min_keep"]),
        params=lambda b, v: _dict(p=per_row(_prob((0.0, 0.5, 0.9, 0.95, 1.0), 0.0, 1.0), b),
                                  min_keep=per_row(st.sampled_from([0, 1, 3]), b, np.int64)),
        impl=lambda impl, x, p: impl("top_p", x, p["p"], p["min_keep"]),
        variants=w.mass_variants("top_p", w.descending), key=_logit_key, ties=prob_classes, noop=({"p": 1.0, "min_keep": 0}, {"p": 1.5, "min_keep": 2}),
        monotone=(("p", +1, -math.inf),), min_keep=True,
        tags=COUNT_FIXED,
        allowance="the crossing token may differ when the cumulative mass is within its window: each "
                  "p_i within u·(|l_i - max| + exp_u + 2) + θ (θ the normaliser's bound under the contract), the "
                  "k-term mass within the order-free bound of a sum of non-negative terms; ties at the "
                  "boundary interchangeable",
        corner=lambda v: {"p": 0.01, "min_keep": 0}, cut=c.mass_cut, boundary=lambda k, m: {"p": m / k},
        chain=ChainRole(default=True, position=6), order=_mass("top_p", 0.05, 0.99),
        llama=LlamaRole("top-p", lambda v: _keep_p(0.0, 0.5, 0.95, 1.0), lambda p, v: peer.top_p(p["p"], p["min_keep"]),
                        _top_p, families=SORTABLE, sorts=True, backend=True, backend_chain="prefix",
                        backend_params=lambda v: _dict(p=st.sampled_from([0.0, 0.25, 0.5, 0.9, 0.95, 1.0, 1.5]),
                                                        min_keep=_KEEP),
                        call="L.llama_sampler_init_top_p" + _CALL_P, letter="p",
                        settings=lambda q: {"p": q.top_p, "min_keep": q.min_keep})),
    SamplerRecord(
        name="min_p", kind="filter", impl_name="min_p", build=lambda p, v: s.min_p(p["p"], p["min_keep"]),
        params=lambda b, v: _dict(p=per_row(_prob((0.0, 0.05, 0.1, 0.5, 1.0, 1.05), 0.0, 1.0), b),
                                  min_keep=per_row(st.sampled_from([0, 1, 3]), b, np.int64)),
        impl=lambda impl, x, p: impl("min_p", x, p["p"], p["min_keep"]),
        variants=w.min_p_variants, key=_logit_key, ties=prob_classes, noop=({"p": 0.0, "min_keep": 0}, {"p": -1.0, "min_keep": 3}),
        monotone=(("p", -1, -math.inf),), min_keep=True,
        tags=COUNT_FIXED,
        allowance="tokens within u·max(|max + ln p| + 2|ln p| + 1, |ln p| + 8) of the threshold max + ln p "
                  "(logf and one addition; or the probability form p_i >= p·p_max); exact at p = 1 on logits",
        corner=lambda v: {"p": 0.99, "min_keep": 0}, cut=c.min_p_cut, boundary=lambda k, m: {"p": 1.0},
        chain=ChainRole(default=True, position=7), order=_mass("min_p", 0.01, 0.9),
        llama=LlamaRole("min-p", lambda v: _keep_p(0.0, 0.05, 0.5, 1.0, 1.05), lambda p, v: peer.min_p(p["p"], p["min_keep"]),
                        _min_p, families=SORTABLE, sorts=True, backend=True, backend_chain="prefix",
                        backend_params=lambda v: _dict(p=st.sampled_from([-0.5, 0.0, 0.05, 0.1, 0.5, 1.0, 1.05]),
                                                        min_keep=_KEEP),
                        call="L.llama_sampler_init_min_p" + _CALL_P, letter="m",
                        settings=lambda q: {"p": q.min_p, "min_keep": q.min_keep})),
    SamplerRecord(
        name="typical", kind="filter", impl_name="typical", build=lambda p, v: s.typical(p["p"], p["min_keep"]),
        params=lambda b, v: _dict(p=per_row(_prob((0.0, 0.5, 0.95, 1.0), 0.0, 1.0), b),
                                  min_keep=per_row(st.sampled_from([0, 1, 3]), b, np.int64)),
        impl=lambda impl, x, p: impl("typical", x, p["p"], p["min_keep"]),
        variants=w.mass_variants("typical", w.typical_order), key=w.typical_key, ties=prob_classes, noop=({"p": 1.0, "min_keep": 0},),
        monotone=(("p", +1, -math.inf),), min_keep=True,
        tags=COUNT_FIXED,
        allowance="the mass window as top_p (in typicality order); scores |-ln p - H| within each -ln p's "
                  "error (ρ + 2u|ln p|) plus H's (θ·Σp|ln p + 1| + the entropy sum's bound) are "
                  "interchangeable, and so are tokens whose fp32 probability is below the normal range",
        corner=lambda v: {"p": 0.01, "min_keep": 0}, cut=c.mass_cut, boundary=lambda k, m: {"p": m / k},
        chain=ChainRole(position=5), order=_mass("typical", 0.05, 0.99),
        llama=LlamaRole("typical", lambda v: _keep_p(0.0, 0.5, 0.95, 1.0), lambda p, v: peer.typical(p["p"], p["min_keep"]),
                        _typical, families=NO_UNDERFLOW, sorts=True, backend_chain="suffix",
                        backend_params=lambda v: _dict(p=st.sampled_from([0.0, 0.5, 0.9, 1.0]), min_keep=_KEEP),
                        call="L.llama_sampler_init_typical" + _CALL_P, letter="y",
                        settings=lambda q: {"p": q.typ_p, "min_keep": q.min_keep})),
    SamplerRecord(
        name="top_n_sigma", kind="filter", impl_name="top_n_sigma", build=lambda p, v: s.top_n_sigma(p["n"]),
        params=lambda b, v: _dict(n=per_row(_prob((-1.0, 0.0, 0.5, 1.0, 2.0, 3.0), 0.0, 5.0), b)),
        impl=lambda impl, x, p: impl("top_n_sigma", x, p["n"]), key=w.sigma_key, variants=w.sigma_variants, ties=logit_classes,
        noop=({"n": 0.0}, {"n": -1.0}), monotone=(("n", +1, 1e-3),),
        allowance="tokens within u·(|max| + |thr| + nσ) + nσ·(θ_sq/2 + 3u + (δmean/σ)²/2) of max - n·σ "
                  "(θ_sq the squares' sum bound under the contract)",
        corner=lambda v: {"n": 1.0}, cut=c.sigma_convention, chain=ChainRole(position=3),
        order=OrderRole(lambda exact: {"n": floats32(0.1, 3.0)}, lambda p, v: {"n": p["n"]}),
        llama=LlamaRole("top-n-sigma", lambda v: _dict(n=f32(0.0, 5.0, -1.0, 0.0, 1.0, 2.0)),
                        lambda p, v: peer.top_n_sigma(p["n"]), _top_n_sigma, backend=True, backend_chain="suffix",
                        backend_params=lambda v: _dict(n=st.sampled_from([-1.0, 0.0, 0.5, 1.0, 2.0])),
                        call="L.llama_sampler_init_top_n_sigma({n})", letter="s", settings=lambda q: {"n": q.top_n_sigma})),
    SamplerRecord(
        name="xtc", kind="filter", impl_name="xtc", build=_make_xtc, oracle=_xtc_oracle, bracket_on="removed",
        params=lambda b, v: _dict(probability=per_row(_prob((0.0, 0.5, 1.0), 0.0, 1.0), b),
                                  threshold=per_row(_prob((0.1, 0.3, 0.5, 0.6), 0.0, 0.6), b),
                                  min_keep=per_row(st.sampled_from([0, 1, 3]), b, np.int64),
                                  chance=per_row(floats32(0, 1, exclude_max=True), b, np.float32)),
        impl=lambda impl, x, p: impl("xtc", x, p["chance"], p["probability"], p["threshold"], p["min_keep"]),
        variants=w.xtc_variants, key=_logit_key, ties=prob_classes,
        noop=({"probability": 0.0, "threshold": 0.1, "min_keep": 0, "chance": 0.0},
              {"probability": 1.0, "threshold": 0.6, "min_keep": 0, "chance": 0.0}),
        min_keep=True, masked_are_candidates=False,
        tags=COUNT_FIXED,
        allowance="tokens whose probability is within t·(u·(|ln(t·S)| + exp_u + 2) + θ) + u·t of the threshold t. Judged against "
                  "the oracle on the array without -inf entries: llama.cpp's min_keep test counts -inf "
                  "candidates in size (size - pos_last >= min_keep), so its own result differs between "
                  "a truncated and a masked chain",
        corner=lambda v: {"probability": 1.0, "threshold": 0.1, "min_keep": 0, "chance": 0.0},
        boundary=lambda k, m: {"threshold": 1 / k, "probability": 1.0, "chance": 0.0}, chain=ChainRole(position=8),
        # in the order matrix always applied (probability 1: llama.cpp's chance <= 1 never skips it),
        # so its place in the chain decides on one distribution, not on a mixture
        order=OrderRole(lambda exact: {"xtc": floats32(0.05, 0.5)},
                        lambda p, v: {"probability": 1.0, "threshold": p["xtc"], "min_keep": 0, "seed": 0}),
        llama=LlamaRole("xtc", lambda v: _dict(probability=f32(0.0, 1.0, 0.0, 0.5, 1.0), threshold=f32(0.0, 0.6, 0.1, 0.3, 0.5, 0.6),
                                                min_keep=_KEEP, seed=peer_seed()),
                        lambda p, v: peer.xtc(p["probability"], p["threshold"], p["min_keep"], p["seed"]), _xtc,
                        families=SORTABLE, stream="fed", sorts=True,
                        stream_params={"probability": 0.5, "threshold": 0.1, "min_keep": 0, "seed": 7},
                        backend_chain="suffix",
                        backend_params=lambda v: _dict(probability=st.sampled_from([0.0, 0.5, 1.0]),
                                                        threshold=st.sampled_from([0.0, 0.1, 0.3, 0.5, 0.6]),
                                                        min_keep=_KEEP, seed=st.integers(0, 2**16)),
                        call="L.llama_sampler_init_xtc({probability}, {threshold}, {min_keep}, {seed})", letter="x",
                        settings=lambda q: {"probability": q.xtc_probability, "threshold": q.xtc_threshold,
                                            "min_keep": q.min_keep, "seed": q.seed})),
    SamplerRecord(
        name="logit_bias", kind="transform", impl_name="logit_bias", build=_make_bias, oracle=_bias_oracle,
        params=_bias_params,
        impl=lambda impl, x, p: impl("logit_bias", x, _dense_bias(p, x.shape[0], x.shape[1])),
        transform_bound_u=_bias_bound,
        allowance="one rounding of l + b, plus one per repeated bias summed into the dense fp32 "
                  "bias: (repeats + 1)·u of (|l| + Σ|b|), relative to |l + b| (cancellation included)",
        corner=lambda v: {"bias_ids": np.array([0, v - 1, -1, -1]), "bias_vals": np.array([2.5, -1.0, 0.0, 0.0])},
        chain=ChainRole(_exact_bias, position=0),
        order=OrderRole(lambda exact: {"bias": st.lists(st.tuples(st.integers(0, 63), floats32(-5, 5)), max_size=3)},
                        lambda p, v: {"biases": [(t % v, b) for t, b in p["bias"]]}),
        llama=LlamaRole("logit-bias", lambda v: _dict(biases=st.lists(st.tuples(
                            st.integers(0, v - 1), st.one_of(f32(-30.0, 30.0), st.just(float("-inf")))), max_size=6)),
                        lambda p, v: peer.logit_bias(v, p["biases"]), _legal_bias, backend=True,
                        call="bias({n_vocab}, {biases})")),
    SamplerRecord(
        name="penalties", kind="transform", impl_name="penalties", build=_make_penalties, oracle=_penalties_oracle,
        params=_penalty_params,
        impl=lambda impl, x, p: impl("penalties", x, p["history"], p["last_n"], p["repeat"], p["freq"], p["present"]),
        transform_bound_u=_penalties_bound,
        noop=({"history": np.array([0, 0]), "last_n": 0, "repeat": 2.0, "freq": 1.0, "present": 1.0},
              {"history": np.array([0, 0]), "last_n": 8, "repeat": 1.0, "freq": 0.0, "present": 0.0}),
        allowance="4 u of (|l|·max(r, 1/r) + c·|freq| + |present|) per logit, relative to the result",
        corner=lambda v: {"history": np.array([0, 1, 1, v - 1]), "last_n": 8, "repeat": 1.3, "freq": 0.5,
                          "present": 0.25},
        chain=ChainRole(_exact_penalties, default=True, position=1),
        order=OrderRole(lambda exact: {"repeat": floats32(0.5, 2.0), "freq": floats32(-1.0, 1.0),
                                       "present": floats32(-1.0, 1.0), "history": st.lists(st.integers(0, 63), max_size=4)},
                        lambda p, v: {"last_n": 16, "repeat": p["repeat"], "freq": p["freq"], "present": p["present"],
                                      "history": [t % v for t in p["history"]]}),
        llama=LlamaRole("penalties", lambda v: _dict(
                            last_n=st.sampled_from([0, 1, 3, 8, 64]), repeat=f32(0.2, 3.0, 1.0, 1.1, 50.0),
                            freq=f32(-2.0, 2.0, 0.0, 0.5), present=f32(-2.0, 2.0, 0.0, 0.25), history=token_history(v)),
                        lambda p, v: peer.penalties(p["last_n"], p["repeat"], p["freq"], p["present"], n_vocab=v),
                        _transform(_penalty_tol), history=True, stream="fed",
                        stream_params={"last_n": 64, "repeat": 1.1, "freq": 0.5, "present": 0.25, "history": []},
                        backend=True, backend_chain="prefix",
                        backend_params=lambda v: _dict(last_n=st.sampled_from([0, 1, 3, 64]),
                                                        repeat=st.sampled_from([0.5, 1.0, 2.0]), freq=_BACKEND_EIGHTHS,
                                                        present=_BACKEND_EIGHTHS, n_vocab=st.just(v)),
                        call="L.llama_sampler_init_penalties({n_vocab}, {last_n}, {repeat}, {freq}, {present})",
                        letter="e", settings=lambda q: {"last_n": q.penalty_last_n, "repeat": q.penalty_repeat,
                                                        "freq": q.penalty_freq, "present": q.penalty_present,
                                                        "history": []})),
    SamplerRecord(
        name="mirostat_v2", kind="select", impl_name="mirostat_v2", build=_make_mirostat_v2, oracle=_mirostat_v2_oracle,
        params=lambda b, v: _dict(mu=per_row(_prob((0.5, 10.0), 0.0, 20.0), b),
                                  u=per_row(st.floats(0, 1, exclude_max=True), b),
                                  tau=per_row(st.sampled_from([3.0, 5.0]), b), eta=per_row(st.sampled_from([0.1, 1.0]), b)),
        impl=lambda impl, x, p: impl("mirostat_v2", x, p["mu"], p["u"], p["tau"], p["eta"]),
        variants=w.mirostat_v2_variants, judge_state=judge_mu, ties=prob_classes,
        allowance="tokens whose surprise -log2 p is within (ρ at the cut)/ln 2 + 3u·mu of mu, or whose CDF boundary is "
                  "within the prefix-sum allowance of u; the updated mu within the float32 error of "
                  "mu - eta·(-log2 q - tau) for a legal survivor set (properties/samplers/stateful.py)",
        corner=lambda v: {"mu": 5.0, "u": 0.5, "tau": 3.0, "eta": 0.1},
        llama=LlamaRole("mirostat-v2", lambda v: _dict(seed=peer_seed(), tau=f32(0.5, 10.0, 5.0), eta=f32(0.0, 1.0, 0.1)),
                        lambda p, v: peer.mirostat_v2(p["seed"], p["tau"], p["eta"]), _legal_mirostat_v2,
                        families=SORTABLE, stream="own", self_state=True, sorts=True,
                        stream_params={"seed": 7, "tau": 5.0, "eta": 0.1})),
    # oracle-only samplers: invariants and the llama.cpp peer judge them
    SamplerRecord(
        name="dry", kind="transform", params=lambda b, v: st.just({}), build=_make_dry,
        oracle=lambda p: _make_dry({"multiplier": 1.0, "base": 1.75, "allowed_length": 2, "last_n": 64,
                                    "breakers": ()}, 0),
        llama=LlamaRole("dry", lambda v: _dict(
                            multiplier=f32(0.0, 3.0, 0.0, 0.8), base=f32(0.5, 3.0, 1.0, 1.75),
                            allowed_length=st.integers(0, 4), last_n=st.sampled_from([0, 2, 8, 64]),
                            breakers=dry_breakers(v), history=token_history(v)),
                        lambda p, v: peer.dry(p["multiplier"], p["base"], p["allowed_length"], p["last_n"], p["breakers"]),
                        _transform(_dry_tol), history=True, stream="fed",
                        stream_params={"multiplier": 0.8, "base": 1.75, "allowed_length": 2, "last_n": 64,
                                       "breakers": [[1], [2, 3]], "history": []},
                        letter="d", settings=lambda q: {"multiplier": q.dry_multiplier, "base": q.dry_base,
                                                        "allowed_length": q.dry_allowed_length,
                                                        "last_n": q.dry_penalty_last_n, "breakers": q.dry_breakers,
                                                        "history": []})),
    SamplerRecord(
        name="mirostat", kind="select", params=lambda b, v: st.just({}), build=_make_mirostat,
        oracle=lambda p: _make_mirostat({"seed": 0, "tau": 5.0, "eta": 0.1, "m": 100}, p["n_vocab"]),
        llama=LlamaRole("mirostat", lambda v: _dict(seed=peer_seed(), tau=f32(0.5, 4.0, 3.0), eta=f32(0.0, 1.0, 0.1),
                                                     m=st.sampled_from([2, 10, 100])),
                        lambda p, v: peer.mirostat(v, p["seed"], p["tau"], p["eta"], p["m"]), _legal_mirostat,
                        families=("zipf",), stream="own", self_state=True, sorts=True,
                        stream_params={"seed": 7, "tau": 3.0, "eta": 0.1, "m": 100},
                        call="L.llama_sampler_init_mirostat({n_vocab}, {seed}, {tau}, {eta}, {m})")),
    SamplerRecord(
        name="adaptive_p", kind="select", params=lambda b, v: st.just({}), build=_make_adaptive_p,
        oracle=lambda p: _make_adaptive_p({"target": 0.5, "decay": 0.9, "seed": 0}, 0),
        llama=LlamaRole("adaptive-p", lambda v: _dict(target=f32(-1.0, 1.2, -1.0, 0.5, 1.2),
                                                       decay=f32(0.0, 1.0, 0.9, 0.99, 1.0), seed=peer_seed()),
                        lambda p, v: peer.adaptive_p(p["target"], p["decay"], p["seed"]), _legal_adaptive_p,
                        stream="own", self_state=True, stream_params={"target": 0.5, "decay": 0.9, "seed": 7})),
]


def _replayed(smp: s.Sampler, doubles=(), floats=()) -> s.Sampler:
    smp.rng = Replay(doubles=list(doubles), floats=list(floats))
    return smp


class _Catalogue(dict):
    """name -> record; a name that is no record is an error that lists the records."""

    def __missing__(self, name: str) -> SamplerRecord:
        raise KeyError(f"no sampler record named {name!r} (records: {', '.join(self)})")


RECORDS_BY_NAME: dict[str, SamplerRecord] = _Catalogue({r.name: r for r in RECORDS})
BY_LLAMA_NAME: dict[str, SamplerRecord] = _Catalogue({r.llama.name: r for r in RECORDS if r.llama})
"""llama.cpp's own name (the oracle sampler's ``.name``, e.g. "top-k") -> the record."""


def record_named(name: str) -> SamplerRecord:
    return RECORDS_BY_NAME[name]


def sampler_records(*kinds: str, impl_only: bool = False) -> list[SamplerRecord]:
    return [r for r in RECORDS if (not kinds or r.kind in kinds) and (r.has_impl or not impl_only)]


def names(role: str) -> tuple[str, ...]:
    """The names of the records that have the facet ``role`` ("chain", "order", "llama", ...)."""
    return tuple(r.name for r in RECORDS if getattr(r, role) is not None)
