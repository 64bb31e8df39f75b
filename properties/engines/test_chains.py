"""Whole chains: the engine's own ``llama_cpp_chain`` (``<impl>.engines``, or ``engines.`` over the
harness protocol) judged against the oracle chain with the legal sets composed stage by stage
(``properties/engines/chains_whole.py``), and ``llama_cpp_chain_dist``'s draws against one CDF of
the engine's own final row (``properties/cdf_shape.py``). Order and hand-off bugs (temperature in
the wrong place, a stale softmax handed to top_p) fail here with a shrunk witness naming the
first stage whose legal sets the engine leaves."""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings, strategies as st

from properties import cdf_shape
from properties.engines.chains_whole import ChainParams, violation
from properties.engines.records import engines_impl
from properties.plugin import covered
from properties.failure import Failure
from properties.samplers.strategies import cases

_EXAMPLES = max(10, settings.default.max_examples // 2)


@st.composite
def chain_params(draw, vocab: int) -> ChainParams:
    h = draw(st.integers(0, 8), label="history length")
    history = np.asarray(draw(st.lists(st.integers(-1, vocab - 1), min_size=h, max_size=h), label="history"),
                         dtype=np.int64)
    return ChainParams(history=history, last_n=draw(st.sampled_from([0, 8, 64]), label="last_n"),
                       repeat=draw(st.sampled_from([1.0, 1.1, 1.5]), label="repeat"),
                       freq=draw(st.sampled_from([0.0, 0.5]), label="freq"),
                       present=draw(st.sampled_from([0.0, 0.25]), label="present"),
                       k=draw(st.sampled_from([0, 1, 5, 40, vocab]), label="k"),
                       p=draw(st.sampled_from([1.0, 0.95, 0.8, 0.5]), label="p"),
                       m=draw(st.sampled_from([0.0, 0.05, 0.2]), label="m"),
                       t=draw(st.sampled_from([1.0, 0.7, 0.3, 1.5, 3.0]), label="t"))


def _draw(data) -> tuple[np.ndarray, ChainParams]:
    case = data.draw(cases(max_batch=1, max_vocab=4096), label="case")
    row = case.logits[0].astype(np.float32)
    return row, data.draw(chain_params(row.size), label="chain")


def _args(row: np.ndarray, cp: ChainParams) -> tuple:
    return (row[None, :], cp.history[None, :], cp.last_n, cp.repeat, cp.freq, cp.present, cp.k, cp.p, cp.m, cp.t)


@settings(max_examples=_EXAMPLES)
@given(data=st.data())
def test_llama_cpp_chain_follows_the_oracle_chain(impl, data):
    row, cp = _draw(data)
    with covered():
        out = np.asarray(engines_impl(impl)("llama_cpp_chain", *_args(row, cp)))[0]
    why = violation(out, row.astype(np.float64), cp)
    if why is not None:
        raise Failure(why, property="llama_cpp_chain ≡ the oracle's chain", record="llama_cpp_chain", case=cp)


@settings(max_examples=max(5, _EXAMPLES // 4))
@given(data=st.data())
def test_llama_cpp_chain_dist_draws_from_its_own_chain(impl, data):
    """The engine's final row judged as above, then its draws at ~250 uniforms against one CDF of
    that row, laid out in token order or in llama.cpp's sorted order (its dist walks the candidates
    as the chain's sort left them): a dist that draws from another row than the chain's, or with a
    drifting float32 running sum, fails."""
    row, cp = _draw(data)
    with covered():
        sub = engines_impl(impl)
        out = np.asarray(sub("llama_cpp_chain", *_args(row, cp)))[0].astype(np.float32)
        why = violation(out, row.astype(np.float64), cp)
        if why is not None:
            raise Failure(why, property="llama_cpp_chain ≡ the oracle's chain", record="llama_cpp_chain", case=cp)
        u = cdf_shape.uniforms(out.astype(np.float64))
        n = u.size
        ids = np.asarray(sub("llama_cpp_chain_dist", np.repeat(row[None, :], n, 0), np.repeat(cp.history[None, :], n, 0),
                             cp.last_n, cp.repeat, cp.freq, cp.present, cp.k, cp.p, cp.m, cp.t, u))
    res = cdf_shape.judge_any_layout(out.astype(np.float64), u, ids)  # token order, or llama.cpp's sorted one
    if not res.passed:
        raise Failure(f"does not draw from its own chain's row: {res.describe()}",
                      property="dist follows one CDF",
                      record="llama_cpp_chain_dist", case=cp, category="distribution")
