"""Whole chains: the engine's own ``llama_cpp_chain`` (``<impl>.engines``, or ``engines.`` over the
harness protocol) judged against the oracle chain with the legal sets composed stage by stage
(``properties/engines/chains_whole.py``), and ``llama_cpp_chain_dist``'s draws against one CDF of
the engine's own final row (``properties/cdf_shape.py``). Order and hand-off bugs (temperature in
the wrong place, a stale softmax handed to top_p) fail here with a shrunk witness naming the
first stage whose legal sets the engine leaves and the known mistake that explains the engine's
row (``properties/engines/attribution.py``). The cases: ``properties/engines/chain_cases.py``."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings

from properties import cdf_shape
from properties.engines.chain_cases import chain_args, chain_cases, drawn_budget, judge, with_corners
from properties.engines.records import engines_impl
from properties.plugin import covered
from properties.failure import Failure

@pytest.mark.calls("llama_cpp_chain")
@with_corners
@settings(max_examples=drawn_budget())
@given(cc=chain_cases())
def test_llama_cpp_chain_follows_the_oracle_chain(impl, cc):
    with covered():
        sub = engines_impl(impl)
        why = judge(lambda *args: sub("llama_cpp_chain", *args), cc)
    if why is not None:
        raise Failure(why, property="llama_cpp_chain ≡ the oracle's chain", record="llama_cpp_chain", case=cc)


@pytest.mark.calls("llama_cpp_chain", "llama_cpp_chain_dist")
@with_corners
@settings(max_examples=max(5, settings.default.max_examples // 8))
@given(cc=chain_cases())
def test_llama_cpp_chain_dist_draws_from_its_own_chain(impl, cc):
    """The engine's final row judged as above, then its draws at ~250 uniforms against one CDF of
    that row, laid out in token order or in llama.cpp's sorted order (its dist walks the candidates
    as the chain's sort left them): a dist that draws from another row than the chain's, or with a
    drifting float32 running sum, fails."""
    row, cp = cc.row, cc.chain
    with covered():
        sub = engines_impl(impl)
        out = np.asarray(sub("llama_cpp_chain", *chain_args(cc)))[0].astype(np.float32)
        why = judge(lambda *args: out[None, :], cc)
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
