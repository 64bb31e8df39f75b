"""The sampler records. Each states its boundary allowance (``allowance``) in words."""
from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

from oracle import samplers as s
from oracle.rng import Replay
from properties.samplers.record import Params, SamplerRecord
from properties.numerics import U32, log2n, mass_allowance
from properties.samplers.stateful import judge_mu
from properties.samplers.strategies import floats32, per_row


def _dict(**strategies: st.SearchStrategy) -> st.SearchStrategy[Params]:
    return st.fixed_dictionaries(strategies)


def _prob(special: tuple[float, ...], lo: float, hi: float) -> st.SearchStrategy[float]:
    return st.one_of(st.sampled_from(special), floats32(lo, hi))


def _logit_key(row: np.ndarray, params: Params) -> tuple[np.ndarray, float]:
    return row, 0.0


def _kept_count(record: SamplerRecord, row: np.ndarray, params: Params) -> int:
    return int(record.oracle_kept(row, params).sum())


def exact_masses(row: np.ndarray) -> bool:
    """True when every fp32 probability and partial sum of the row is exact: 2^j equal finite
    logits (each p = 2^-j, exp(0) = 1 and the sum 2^j are exact). There the boundary convention
    (cum >= p or cum > p) is observable, and no rounding allowance may hide it."""
    fin = row[np.isfinite(row)]
    return fin.size > 0 and bool((fin == fin[0]).all()) and (fin.size & (fin.size - 1)) == 0


def _mass_variants(name: str):
    """p ± the fp32 cumulative-mass allowance at the oracle's crossing position (none on rows
    whose masses are exact)."""
    def variants(params: Params, row: np.ndarray) -> list[Params]:
        if exact_masses(row):
            return [params]
        k = _kept_count(RECORDS_BY_NAME[name], row, params)
        d = mass_allowance(k, int(np.isfinite(row).sum()))
        return [params, {**params, "p": params["p"] - d}, {**params, "p": params["p"] + d}]
    return variants


def _min_p_variants(params: Params, row: np.ndarray) -> list[Params]:
    # fp32 max + logf(p): both terms rounded, so the threshold moves by ~u·(|max| + |ln p|) each;
    # at p == 1 both are exact (logf(1) = 0, max + 0 = max) and the threshold is the max itself
    if params["p"] <= 0 or params["p"] == 1:
        return [params]
    m = float(row[np.isfinite(row)].max()) if np.isfinite(row).any() else 0.0
    # capped: past e^±700 the variants already mean "keep only the max" and "keep everything"
    eps = min(4 * U32 * (abs(m) + abs(math.log(params["p"])) + 1), 700.0)
    return [params, {**params, "p": params["p"] * math.exp(eps)}, {**params, "p": params["p"] * math.exp(-eps)}]


def _typical_key(row: np.ndarray, params: Params) -> tuple[np.ndarray, float]:
    finite = np.isfinite(row)
    if not finite.any():
        return row, 0.0
    p = np.where(finite, np.exp(row - row[finite].max()), 0.0)
    p /= p.sum()
    with np.errstate(divide="ignore", invalid="ignore"):
        nlp = -np.log(p)
        h = float(-np.where(p > 0, p * np.log(p), 0.0).sum())
    spread = float(np.abs(nlp[p > 0]).max())
    eps = 4 * U32 * (spread + h + log2n(int(finite.sum())) + 8)
    return np.where(p > 0, -np.abs(nlp - h), -np.inf), eps


def _sigma_key(row: np.ndarray, params: Params) -> tuple[np.ndarray, float]:
    finite = row[np.isfinite(row)]
    if finite.size == 0:
        return row, 0.0
    n = max(params["n"], 0.0)
    # fp32 mean/std of n terms: ~log2(n)·u relative to their magnitudes
    eps = 4 * U32 * (abs(finite.max()) + n * (finite.std() + abs(finite.mean())) * (log2n(finite.size) + 4))
    return row, eps


def _sigma_variants(params: Params, row: np.ndarray) -> list[Params]:
    """The threshold max - n·std moved by ± the key's eps (n ± eps/std): a token within eps of
    the threshold may go either way even when no token lies beyond it (two finite logits with
    n = 2 put the threshold exactly on the smaller one), which tie expansion alone cannot see."""
    finite = row[np.isfinite(row)]
    std = float(finite.std()) if finite.size else 0.0
    if params["n"] <= 0 or std == 0:
        return [params]
    d = _sigma_key(row, params)[1] / std
    lower = max(params["n"] - d, 5e-324)  # n <= 0 would switch the filter off, not move its threshold
    return [params, {**params, "n": lower}, {**params, "n": params["n"] + d}]


def _xtc_oracle(p: Params) -> s.Sampler:
    smp = s.xtc(p["probability"], p["threshold"], p["min_keep"], 0)
    if hasattr(smp, "rng"):
        smp.rng = Replay(floats=[p["chance"]])
    return smp


def _xtc_variants(params: Params, row: np.ndarray) -> list[Params]:
    if exact_masses(row):
        return [params]
    d = mass_allowance(8, int(np.isfinite(row).sum()))
    return [params, {**params, "threshold": params["threshold"] - d}, {**params, "threshold": params["threshold"] + d}]


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


def _temp_ext_bound(row: np.ndarray, p: Params) -> np.ndarray:
    finite = row[np.isfinite(row)]
    spread = float(finite.max() - finite.min()) if finite.size else 0.0
    lo = max(0.0, p["t"] - p["delta"])
    amp = (p["t"] + p["delta"] - lo) / max(lo, 1e-6) if p["delta"] > 0 else 0.0
    return np.full(row.size, 4 + (abs(p["exponent"]) + 1) * (log2n(row.size) + 12 + spread) * amp)


def _dist_legal(row: np.ndarray, p: Params) -> np.ndarray:
    """Tokens whose CDF interval lies within the fp32 prefix-sum allowance of u."""
    finite = np.isfinite(row)
    e = np.where(finite, np.exp(row - row[finite].max()), 0.0)
    cdf = np.cumsum(e) / e.sum()
    lo = np.concatenate([[0.0], cdf[:-1]])
    d = mass_allowance(row.size, row.size)
    return (e > 0) & (lo <= p["u"] + d) & (cdf >= p["u"] - d)


def _greedy_legal(row: np.ndarray, p: Params) -> np.ndarray:
    legal = np.zeros(row.size, dtype=bool)
    legal[int(np.argmax(row))] = True
    return legal


def _mirostat_v2_variants(params: Params, row: np.ndarray) -> list[Params]:
    n = int(np.isfinite(row).sum())
    dm, du = (log2n(n) + 8) * U32 * 8, mass_allowance(n, n)
    return [{**params, "mu": params["mu"] + a, "u": min(max(params["u"] + b, 0.0), 1 - 2**-53)}
            for a in (-dm, 0.0, dm) for b in (-du, 0.0, du)]


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
        allowance="the token whose CDF interval contains u; a neighbour when u is within "
                  "(2n + log2 n + 8)·u32 of a CDF boundary (fp32 prefix sum over n tokens)",
        legal=_dist_legal),
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
        transform_bound_u=_temp_ext_bound, noop=({"t": 1.0, "delta": 0.0, "exponent": 1.0},),
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
        variants=_mass_variants("top_p"), key=_logit_key, noop=({"p": 1.0, "min_keep": 0}, {"p": 1.5, "min_keep": 2}),
        monotone=(("p", +1, -math.inf),), min_keep=True,
        tags=COUNT_FIXED,
        allowance="the crossing token may differ when the cumulative mass is within "
                  "(2k + log2 n + 8)·u32 of p (k = tokens kept); ties at the boundary interchangeable"),
    SamplerRecord(
        name="min_p", kind="filter", impl_name="min_p", oracle=lambda p: s.min_p(p["p"], p["min_keep"]),
        params=lambda b, v: _dict(p=per_row(_prob((0.0, 0.05, 0.1, 0.5, 1.0, 1.05), 0.0, 1.0), b),
                                  min_keep=per_row(st.sampled_from([0, 1, 3]), b, np.int64)),
        impl=lambda impl, x, p: impl("min_p", x, p["p"], p["min_keep"]),
        variants=_min_p_variants, key=_logit_key, noop=({"p": 0.0, "min_keep": 0}, {"p": -1.0, "min_keep": 3}),
        monotone=(("p", -1, -math.inf),), min_keep=True,
        tags=COUNT_FIXED,
        allowance="tokens within 4·u32·(|max logit| + |ln p| + 1) of the threshold max + ln p"),
    SamplerRecord(
        name="typical", kind="filter", impl_name="typical", oracle=lambda p: s.typical(p["p"], p["min_keep"]),
        params=lambda b, v: _dict(p=per_row(_prob((0.0, 0.5, 0.95, 1.0), 0.0, 1.0), b),
                                  min_keep=per_row(st.sampled_from([0, 1, 3]), b, np.int64)),
        impl=lambda impl, x, p: impl("typical", x, p["p"], p["min_keep"]),
        variants=_mass_variants("typical"), key=_typical_key, noop=({"p": 1.0, "min_keep": 0},),
        monotone=(("p", +1, -math.inf),), min_keep=True,
        tags=COUNT_FIXED,
        allowance="cumulative-mass allowance as top_p, and typicality scores |-ln p - H| within "
                  "4·u32·(max|ln p| + H + log2 n + 8) of each other are interchangeable"),
    SamplerRecord(
        name="top_n_sigma", kind="filter", impl_name="top_n_sigma", oracle=lambda p: s.top_n_sigma(p["n"]),
        params=lambda b, v: _dict(n=per_row(_prob((-1.0, 0.0, 0.5, 1.0, 2.0, 3.0), 0.0, 5.0), b)),
        impl=lambda impl, x, p: impl("top_n_sigma", x, p["n"]), key=_sigma_key, variants=_sigma_variants,
        noop=({"n": 0.0}, {"n": -1.0}), monotone=(("n", +1, 1e-3),),
        allowance="tokens within 4·u32·(|max| + n·(std + |mean|)·(log2 n + 4)) of max - n·std"),
    SamplerRecord(
        name="xtc", kind="filter", impl_name="xtc", oracle=_xtc_oracle, bracket_on="removed",
        params=lambda b, v: _dict(probability=per_row(_prob((0.0, 0.5, 1.0), 0.0, 1.0), b),
                                  threshold=per_row(_prob((0.1, 0.3, 0.5, 0.6), 0.0, 0.6), b),
                                  min_keep=per_row(st.sampled_from([0, 1, 3]), b, np.int64),
                                  chance=per_row(floats32(0, 1, exclude_max=True), b, np.float32)),
        impl=lambda impl, x, p: impl("xtc", x, p["chance"], p["probability"], p["threshold"], p["min_keep"]),
        variants=_xtc_variants, key=_logit_key,
        noop=({"probability": 0.0, "threshold": 0.1, "min_keep": 0, "chance": 0.0},
              {"probability": 1.0, "threshold": 0.6, "min_keep": 0, "chance": 0.0}),
        min_keep=True, masked_are_candidates=False,
        tags=COUNT_FIXED,
        allowance="tokens whose probability is within (log2 n + 24)·u32 of the threshold. Judged against "
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
        variants=_mirostat_v2_variants, judge_state=judge_mu,
        allowance="tokens whose surprise is within (log2 n + 8)·u32 of mu, or whose CDF boundary is "
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
