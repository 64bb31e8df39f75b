"""The sampler records. Each states its boundary allowance (``allowance``) in words."""
from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from oracle import samplers as s
from oracle.rng import Replay
from properties.samplers.record import Params, SamplerRecord
from properties.samplers import windows as w
from properties.samplers.stateful import judge_mu
from properties.samplers.strategies import floats32, per_row


def _dict(**strategies: st.SearchStrategy) -> st.SearchStrategy[Params]:
    return st.fixed_dictionaries(strategies)


def _prob(special: tuple[float, ...], lo: float, hi: float) -> st.SearchStrategy[float]:
    return st.one_of(st.sampled_from(special), floats32(lo, hi))


def _logit_key(row: np.ndarray, params: Params) -> tuple[np.ndarray, float]:
    return row, 0.0


def _xtc_oracle(p: Params) -> s.Sampler:
    smp = s.xtc(p["probability"], p["threshold"], p["min_keep"], 0)
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


def _penalties_oracle(p: Params) -> s.Sampler:
    smp = s.penalties(p["last_n"], p["repeat"], p["freq"], p["present"])
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
    smp = s.mirostat_v2(0, p["tau"], p["eta"])
    smp.mu, smp.rng = p["mu"], Replay(doubles=[p["u"]])
    return smp


# The number of survivors lies within the counts of the oracle runs at the variants: a tie of
# equal logits chooses *which* tokens survive, never how many (they form a prefix of an order, or
# all pass a threshold on the logit together). Not top_n_sigma, whose near-tie allowance is
# threshold rounding outside the variants: there a tied group may go either way.
COUNT_FIXED = frozenset({"count"})

RECORDS: list[SamplerRecord] = [
    SamplerRecord(
        name="greedy", kind="select", impl_name="greedy", oracle=lambda p: s.greedy(),
        params=lambda b, v: st.just({}), impl=lambda impl, x, p: impl("greedy", x),
        variants=lambda p, row: [p], key=None, allowance="none: the first maximal logit, exactly",
        tags=frozenset({"legal:greedy"})),
    SamplerRecord(
        name="dist", kind="select", impl_name="dist",
        oracle=lambda p: _replayed(s.dist(0), doubles=[p["u"]]),
        params=lambda b, v: _dict(u=per_row(st.floats(0, 1, exclude_max=True), b)),
        impl=lambda impl, x, p: impl("dist", x, p["u"]),
        allowance="the token whose CDF interval (token order) contains u; a neighbour when u is within "
                  "the CDF window: the weights' 2u·(max|l - max| + exp_u + 2), the normaliser θ and a scan in an "
                  "order the contract accepts for a CDF (default: blocked over 1,024 threads or better)",
        legal=w.dist_legal),
    SamplerRecord(
        name="temp", kind="transform", impl_name="temp", oracle=lambda p: s.temp(p["t"]),
        params=lambda b, v: _dict(t=per_row(_prob((1.0, 0.0, -1.0, 0.8, 0.1, 2.0), 0.05, 4.0), b)),
        impl=lambda impl, x, p: impl("temp", x, p["t"]),
        transform_bound_u=lambda row, p: np.full(row.size, 2.0), noop=({"t": 1.0},),
        allowance="2 u per logit (l·(1/t) is two roundings); t <= 0 masks exactly"),
    SamplerRecord(
        name="temp_ext", kind="transform", impl_name="temp_ext",
        oracle=lambda p: s.temp_ext(p["t"], p["delta"], p["exponent"]), params=_temp_ext_params,
        impl=lambda impl, x, p: impl("temp_ext", x, p["t"], p["delta"], p["exponent"]),
        transform_bound_u=w.temp_ext_bound, noop=({"t": 1.0, "delta": 0.0, "exponent": 1.0},),
        masked_are_candidates=False,
        families=("peaked", "flat", "zipf", "plateaus", "near_ties", "one_finite"),
        allowance="4 u plus the fp32 entropy error (log2 n + 12 + logit spread) u, amplified by "
                  "(exponent + 1)·(max_t - min_t)/min_t through the dynamic temperature. Judged against "
                  "the oracle on the array without -inf entries: llama.cpp's ln(size) counts -inf "
                  "candidates, so its own result differs between a truncated and a masked chain"),
    SamplerRecord(
        name="top_k", kind="filter", impl_name="top_k", oracle=lambda p: s.top_k(p["k"]),
        params=lambda b, v: _dict(k=per_row(st.one_of(st.sampled_from([-1, 0, 1, 2, 40, v, v + 3]),
                                                      st.integers(1, max(v, 1))), b, np.int64)),
        impl=lambda impl, x, p: impl("top_k", x, p["k"]), key=_logit_key,
        noop=({"k": 0}, {"k": -5}), monotone=(("k", +1, 1),),
        tags=COUNT_FIXED,
        allowance="none beyond ties: tokens equal to the k-th logit are interchangeable, their count is not"),
    SamplerRecord(
        name="top_p", kind="filter", impl_name="top_p", oracle=lambda p: s.top_p(p["p"], p["min_keep"]),
        params=lambda b, v: _dict(p=per_row(_prob((0.0, 0.5, 0.9, 0.95, 1.0), 0.0, 1.0), b),
                                  min_keep=per_row(st.sampled_from([0, 1, 3]), b, np.int64)),
        impl=lambda impl, x, p: impl("top_p", x, p["p"], p["min_keep"]),
        variants=w.mass_variants("top_p", w.descending), key=_logit_key, noop=({"p": 1.0, "min_keep": 0}, {"p": 1.5, "min_keep": 2}),
        monotone=(("p", +1, -math.inf),), min_keep=True,
        tags=COUNT_FIXED,
        allowance="the crossing token may differ when the cumulative mass is within its window: each "
                  "p_i within u·(|l_i - max| + exp_u + 2) + θ (θ the normaliser's bound under the contract), the "
                  "k-term mass within the order-free bound of a sum of non-negative terms; ties at the "
                  "boundary interchangeable"),
    SamplerRecord(
        name="min_p", kind="filter", impl_name="min_p", oracle=lambda p: s.min_p(p["p"], p["min_keep"]),
        params=lambda b, v: _dict(p=per_row(_prob((0.0, 0.05, 0.1, 0.5, 1.0, 1.05), 0.0, 1.0), b),
                                  min_keep=per_row(st.sampled_from([0, 1, 3]), b, np.int64)),
        impl=lambda impl, x, p: impl("min_p", x, p["p"], p["min_keep"]),
        variants=w.min_p_variants, key=_logit_key, noop=({"p": 0.0, "min_keep": 0}, {"p": -1.0, "min_keep": 3}),
        monotone=(("p", -1, -math.inf),), min_keep=True,
        tags=COUNT_FIXED,
        allowance="tokens within u·max(|max + ln p| + 2|ln p| + 1, |ln p| + 8) of the threshold max + ln p "
                  "(logf and one addition; or the probability form p_i >= p·p_max); exact at p = 1 on logits"),
    SamplerRecord(
        name="typical", kind="filter", impl_name="typical", oracle=lambda p: s.typical(p["p"], p["min_keep"]),
        params=lambda b, v: _dict(p=per_row(_prob((0.0, 0.5, 0.95, 1.0), 0.0, 1.0), b),
                                  min_keep=per_row(st.sampled_from([0, 1, 3]), b, np.int64)),
        impl=lambda impl, x, p: impl("typical", x, p["p"], p["min_keep"]),
        variants=w.mass_variants("typical", w.typical_order), key=w.typical_key, noop=({"p": 1.0, "min_keep": 0},),
        monotone=(("p", +1, -math.inf),), min_keep=True,
        tags=COUNT_FIXED,
        allowance="the mass window as top_p (in typicality order); scores |-ln p - H| within each -ln p's "
                  "error (ρ + 2u|ln p|) plus H's (θ·Σp|ln p + 1| + the entropy sum's bound) are "
                  "interchangeable, and so are tokens whose fp32 probability is below the normal range"),
    SamplerRecord(
        name="top_n_sigma", kind="filter", impl_name="top_n_sigma", oracle=lambda p: s.top_n_sigma(p["n"]),
        params=lambda b, v: _dict(n=per_row(_prob((-1.0, 0.0, 0.5, 1.0, 2.0, 3.0), 0.0, 5.0), b)),
        impl=lambda impl, x, p: impl("top_n_sigma", x, p["n"]), key=w.sigma_key, variants=w.sigma_variants,
        noop=({"n": 0.0}, {"n": -1.0}), monotone=(("n", +1, 1e-3),),
        allowance="tokens within u·(|max| + |thr| + nσ) + nσ·(θ_sq/2 + 3u + (δmean/σ)²/2) of max - n·σ "
                  "(θ_sq the squares' sum bound under the contract)"),
    SamplerRecord(
        name="xtc", kind="filter", impl_name="xtc", oracle=_xtc_oracle, bracket_on="removed",
        params=lambda b, v: _dict(probability=per_row(_prob((0.0, 0.5, 1.0), 0.0, 1.0), b),
                                  threshold=per_row(_prob((0.1, 0.3, 0.5, 0.6), 0.0, 0.6), b),
                                  min_keep=per_row(st.sampled_from([0, 1, 3]), b, np.int64),
                                  chance=per_row(floats32(0, 1, exclude_max=True), b, np.float32)),
        impl=lambda impl, x, p: impl("xtc", x, p["chance"], p["probability"], p["threshold"], p["min_keep"]),
        variants=w.xtc_variants, key=_logit_key,
        noop=({"probability": 0.0, "threshold": 0.1, "min_keep": 0, "chance": 0.0},
              {"probability": 1.0, "threshold": 0.6, "min_keep": 0, "chance": 0.0}),
        min_keep=True, masked_are_candidates=False,
        tags=COUNT_FIXED,
        allowance="tokens whose probability is within t·(u·(|ln(t·S)| + exp_u + 2) + θ) + u·t of the threshold t. Judged against "
                  "the oracle on the array without -inf entries: llama.cpp's min_keep test counts -inf "
                  "candidates in size (size - pos_last >= min_keep), so its own result differs between "
                  "a truncated and a masked chain"),
    SamplerRecord(
        name="logit_bias", kind="transform", impl_name="logit_bias",
        oracle=lambda p: s.logit_bias(p["n_vocab"], _bias_pairs(p)),
        params=_bias_params,
        impl=lambda impl, x, p: impl("logit_bias", x, _dense_bias(p, x.shape[0], x.shape[1])),
        transform_bound_u=_bias_bound,
        allowance="one rounding of l + b, plus one per repeated bias summed into the dense fp32 "
                  "bias: (repeats + 1)·u of (|l| + Σ|b|), relative to |l + b| (cancellation included)"),
    SamplerRecord(
        name="penalties", kind="transform", impl_name="penalties", oracle=_penalties_oracle,
        params=_penalty_params,
        impl=lambda impl, x, p: impl("penalties", x, p["history"], p["last_n"], p["repeat"], p["freq"], p["present"]),
        transform_bound_u=_penalties_bound,
        noop=({"history": np.array([0, 0]), "last_n": 0, "repeat": 2.0, "freq": 1.0, "present": 1.0},
              {"history": np.array([0, 0]), "last_n": 8, "repeat": 1.0, "freq": 0.0, "present": 0.0}),
        allowance="4 u of (|l|·max(r, 1/r) + c·|freq| + |present|) per logit, relative to the result"),
    SamplerRecord(
        name="mirostat_v2", kind="select", impl_name="mirostat_v2", oracle=_mirostat_v2_oracle,
        params=lambda b, v: _dict(mu=per_row(_prob((0.5, 10.0), 0.0, 20.0), b),
                                  u=per_row(st.floats(0, 1, exclude_max=True), b),
                                  tau=per_row(st.sampled_from([3.0, 5.0]), b), eta=per_row(st.sampled_from([0.1, 1.0]), b)),
        impl=lambda impl, x, p: impl("mirostat_v2", x, p["mu"], p["u"], p["tau"], p["eta"]),
        variants=w.mirostat_v2_variants, judge_state=judge_mu,
        allowance="tokens whose surprise -log2 p is within (ρ at the cut)/ln 2 + 3u·mu of mu, or whose CDF boundary is "
                  "within the prefix-sum allowance of u; the updated mu within the float32 error of "
                  "mu - eta·(-log2 q - tau) for a legal survivor set (properties/samplers/stateful.py)"),
    # oracle-only samplers: invariants and the llama.cpp peer judge them
    SamplerRecord(name="dry", kind="transform", params=lambda b, v: st.just({}),
                  oracle=lambda p: s.dry(1.0, 1.75, 2, 64, ())),
    SamplerRecord(name="mirostat", kind="select", params=lambda b, v: st.just({}),
                  oracle=lambda p: s.mirostat(p["n_vocab"], 0, 5.0, 0.1, 100)),
    SamplerRecord(name="adaptive_p", kind="select", params=lambda b, v: st.just({}),
                  oracle=lambda p: s.adaptive_p(0.5, 0.9, 0)),
]


def _replayed(smp: s.Sampler, doubles=(), floats=()) -> s.Sampler:
    smp.rng = Replay(doubles=list(doubles), floats=list(floats))
    return smp


RECORDS_BY_NAME = {r.name: r for r in RECORDS}


def sampler_records(*kinds: str, impl_only: bool = False) -> list[SamplerRecord]:
    return [r for r in RECORDS if (not kinds or r.kind in kinds) and (r.has_impl or not impl_only)]
