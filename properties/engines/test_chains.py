"""Whole chains: the engine's own ``llama_cpp_chain`` (``<impl>.engines``, or ``engines.`` over the
harness protocol) judged against the oracle chain with the legal sets composed stage by stage
(``properties/engines/chains_whole.py``), and ``llama_cpp_chain_dist``'s draws against one CDF of
the engine's own final row (``properties/cdf_shape.py``). Order and hand-off bugs (temperature in
the wrong place, a stale softmax handed to top_p) fail here with a shrunk witness naming the
first stage whose legal sets the engine leaves."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

from properties import cdf_shape
from properties.engines.chains_whole import ChainParams, violation
from properties.engines.records import engines_impl
from properties.plugin import covered
from properties.failure import Failure
from properties.samplers.strategies import Case, cases

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


@dataclass(frozen=True)
class ChainCase:
    """One row (a samplers ``Case``: its repr rebuilds the logits) and the chain's parameters."""
    logits: Case
    chain: ChainParams

    @property
    def row(self) -> np.ndarray:
        return self.logits.logits[0].astype(np.float32)


@st.composite
def chain_cases(draw) -> ChainCase:
    case = draw(cases(max_batch=1, max_vocab=4096), label="case")
    return ChainCase(case, draw(chain_params(case.vocab), label="chain"))


def _corner(seed: int, k: int = 0, p: float = 1.0, m: float = 0.0, t: float = 1.0) -> ChainCase:
    none = np.zeros(0, dtype=np.int64)
    return ChainCase(Case("zipf", 64, "float32", (seed,)), ChainParams(none, 0, 1.0, 0.0, 0.0, k, p, m, t))


# Pinned first, in every profile (as the samplers' corners are): a temperature other than 1 with a
# cut that depends on it (top_p, min_p: temperature before the cut moves it), and top_k then top_p
# (top_p must renormalise over the k survivors). Drawn chains find these too, but a 20-example ci
# run may draw top_k = 1 or a one-token row every time, where order cannot show.
CORNERS = (_corner(61, p=0.5, t=0.3), _corner(62, p=0.8, t=3.0), _corner(63, m=0.05, t=0.3),
           _corner(64, k=5, p=0.8))


def _args(row: np.ndarray, cp: ChainParams) -> tuple:
    return (row[None, :], cp.history[None, :], cp.last_n, cp.repeat, cp.freq, cp.present, cp.k, cp.p, cp.m, cp.t)


def with_corners(test: Callable) -> Callable:
    for c in reversed(CORNERS):
        test = example(cc=c)(test)
    return test


@pytest.mark.calls("llama_cpp_chain")
@with_corners
@settings(max_examples=_EXAMPLES)
@given(cc=chain_cases())
def test_llama_cpp_chain_follows_the_oracle_chain(impl, cc):
    row, cp = cc.row, cc.chain
    with covered():
        out = np.asarray(engines_impl(impl)("llama_cpp_chain", *_args(row, cp)))[0]
    why = violation(out, row.astype(np.float64), cp)
    if why is not None:
        raise Failure(why, property="llama_cpp_chain ≡ the oracle's chain", record="llama_cpp_chain", case=cc)


@pytest.mark.calls("llama_cpp_chain", "llama_cpp_chain_dist")
@with_corners
@settings(max_examples=max(5, _EXAMPLES // 4))
@given(cc=chain_cases())
def test_llama_cpp_chain_dist_draws_from_its_own_chain(impl, cc):
    """The engine's final row judged as above, then its draws at ~250 uniforms against one CDF of
    that row, laid out in token order or in llama.cpp's sorted order (its dist walks the candidates
    as the chain's sort left them): a dist that draws from another row than the chain's, or with a
    drifting float32 running sum, fails."""
    row, cp = cc.row, cc.chain
    with covered():
        sub = engines_impl(impl)
        out = np.asarray(sub("llama_cpp_chain", *_args(row, cp)))[0].astype(np.float32)
        why = violation(out, row.astype(np.float64), cp)
        if why is not None:
            raise Failure(why, property="llama_cpp_chain ≡ the oracle's chain", record="llama_cpp_chain", case=cc)
        u = cdf_shape.uniforms(out.astype(np.float64))
        n = u.size
        ids = np.asarray(sub("llama_cpp_chain_dist", np.repeat(row[None, :], n, 0), np.repeat(cp.history[None, :], n, 0),
                             cp.last_n, cp.repeat, cp.freq, cp.present, cp.k, cp.p, cp.m, cp.t, u))
    res = cdf_shape.judge_any_layout(out.astype(np.float64), u, ids)  # token order, or llama.cpp's sorted one
    if not res.passed:
        raise Failure(f"does not draw from its own chain's row: {res.describe()}",
                      property="dist follows one CDF",
                      record="llama_cpp_chain_dist", case=cc, category="distribution")
