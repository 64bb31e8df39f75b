"""llama.cpp behaviours the oracle deliberately does not copy, each replayed against the real
llama.cpp (llama-cpp-python) with its witness, so an upstream fix shows up as a failure here."""
from __future__ import annotations

import numpy as np
import pytest

from oracle import samplers as s
from oracle.candidates import TokenDataArray
from properties import recording

lc = pytest.importorskip("llama_cpp", reason="llama-cpp-python is not installed (pip install 'logitcheck[peers]')")


def _llama_apply(make_samplers, logits):
    import ctypes

    n = len(logits)
    arr = (lc.llama_token_data * n)()
    for i, value in enumerate(logits):
        arr[i].id, arr[i].logit, arr[i].p = i, float(value), 0.0
    cur = lc.llama_token_data_array(data=arr, size=n, selected=-1, sorted=False)
    samplers = make_samplers()
    for smp in samplers:
        lc.llama_sampler_apply(smp, ctypes.byref(cur))
    for smp in samplers:
        lc.llama_sampler_free(smp)
    return [arr[i].id for i in range(cur.size)]


def _bias(token: int, value: float):
    b = (lc.llama_logit_bias * 1)()
    b[0].token, b[0].bias = token, value
    return b


STALE_SORTED = {
    "id": "LC-STALE-SORTED",
    "sampler": "logit_bias",
    "description": "logit_bias changes logits but leaves cur_p->sorted = true, so a later top_k / top_p / "
                   "min_p trusts the stale order: after top_k(3), a +0.5 bias on token 1 and top_k(1) keep "
                   "token 0 (logit 1.0) instead of token 1 (logit 1.5). common_sampler puts logit_bias first, "
                   "so only custom chains hit it. The oracle invalidates the order.",
    "witness": {"logits": [1.0, 1.0, 1.0], "chain": "top_k(3) -> logit_bias({1: +0.5}) -> top_k(1)"},
}


def test_stale_sorted_after_logit_bias():
    logits = STALE_SORTED["witness"]["logits"]
    got = _llama_apply(lambda: [lc.llama_sampler_init_top_k(3), lc.llama_sampler_init_logit_bias(3, 1, _bias(1, 0.5)),
                                lc.llama_sampler_init_top_k(1)], logits)
    cur = TokenDataArray.from_logits(np.asarray(logits))
    for smp in (s.top_k(3), s.logit_bias(3, {1: 0.5}), s.top_k(1)):
        smp.apply(cur)
    recording.table("llama_cpp_findings_chain", [{**STALE_SORTED, "llama_cpp": got, "oracle": cur.ids.tolist()}])
    assert got == [0], f"llama.cpp now keeps {got}: LC-STALE-SORTED looks fixed upstream - update the finding"
    assert cur.ids.tolist() == [1]
