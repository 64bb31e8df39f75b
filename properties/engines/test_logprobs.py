"""Token logprobs (``engines.logprobs_top_n``, ``engines.logprobs_of``) judged against the
log-softmax model, the top-n convention, -inf / 0.0 exactness and processed vs raw
(``properties.engines.logprobs_checks``, where the bounds are stated); plus the oracle's engine
variants (``oracle.logprobs.VARIANTS``) checked against the engine oracles' distributions."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from oracle import logprobs as olp
from oracle.engines import Settings
from oracle.engines import llama_cpp as o_llama
from oracle.engines import transformers as o_hf
from oracle.engines import vllm as o_vllm
from properties import recording
from properties.engines.logprobs_checks import PROPERTIES
from properties.engines.records import engines_impl
from properties.plugin import covered


@pytest.mark.parametrize("prop", PROPERTIES, ids=str)
@given(data=st.data())
def test_logprobs_property(impl, prop, data):
    case = data.draw(prop.example(), label="case")
    with covered():
        prop.judge(engines_impl(impl), case)
    recording.note("engines:logprobs", prop.name, "float32")


def _grid_row(data, vocab_max: int = 40) -> np.ndarray:
    value = st.one_of(st.integers(-48, 48).map(lambda i: i / 8), st.just(-np.inf))
    return np.asarray(data.draw(st.lists(value, min_size=1, max_size=vocab_max).filter(
        lambda xs: np.isfinite(xs).any()), label="logits"))


@given(data=st.data(), t=st.sampled_from([1.0, 0.7, 1.5]), k=st.sampled_from([0, 1, 3]),
       p=st.sampled_from([1.0, 0.9, 0.5]), mp=st.sampled_from([0.0, 0.1]))
@settings(max_examples=40)
def test_oracle_engine_variants(data, t, k, p, mp):
    """Each variant's processed logprobs are the log of that engine oracle's law; vLLM raw ignores
    the chain; dropped tokens get -inf; at t = 1 processed = raw - ln(surviving mass)."""
    row = _grid_row(data)
    s = Settings(temperature=t, top_k=k, top_p=p, min_p=mp)
    cur = o_llama.truncated(row, s)
    procs = {"llama.cpp-server": (cur.dense_logits(row.size), o_llama.distribution(row, s)),
             "vllm-processed": (o_vllm.processed(row, s), o_vllm.distribution(row, s)),
             "transformers": (o_hf.processed(row, s), o_hf.distribution(row, s))}
    raw = olp.logprobs(row, "raw")
    for name, (proc, law) in procs.items():
        lp = olp.VARIANTS[name](row, proc)
        live = law > 0
        assert (lp[~live] == -np.inf).all(), f"{name}: a dropped token has a finite logprob"
        assert np.allclose(lp[live], np.log(law[live]), rtol=0, atol=1e-12), f"{name}: not the log of the law"
        assert np.array_equal(olp.VARIANTS["vllm-raw"](row, proc), raw)
        if t == 1.0 and name != "llama.cpp-server":  # llama.cpp applies t last; at 1 it is a no-op too
            shift = olp.surviving_mass_shift(row, proc)
            assert np.allclose(lp[live], raw[live] + shift, rtol=0, atol=1e-12), f"{name}: not raw + shift"
        ids, lps = olp.logprobs(row, "top_n", processed=proc, n=row.size, space="processed")
        assert np.array_equal(np.sort(ids), np.arange(row.size)) and (lps[:-1] >= lps[1:]).all()
        assert olp.logprobs(row, "sampled", processed=proc, token=int(ids[0]), space="processed") == lps[0]
    recording.note("engines:logprobs", "oracle_variants", "float64")


def test_oracle_top_n_convention():
    """Fewer finite tokens than n: the lowest masked ids, ascending, at -inf; one finite token: 0.0."""
    row = np.array([-np.inf, 2.0, -np.inf, -np.inf, 2.0, -np.inf])
    ids, lps = olp.logprobs(row, "top_n", n=5)
    assert ids.tolist() == [1, 4, 0, 2, 3] and lps[2:].tolist() == [-np.inf] * 3
    assert np.allclose(lps[:2], np.log(0.5), atol=1e-15)
    one = np.array([-np.inf, -np.inf, 0.3])
    assert olp.logprobs(one, "sampled", token=2) == 0.0
    assert olp.top_n(olp.log_softmax(one), 3)[0].tolist() == [2, 0, 1]
    with pytest.raises(ValueError):
        olp.top_n(olp.log_softmax(one), 4)
