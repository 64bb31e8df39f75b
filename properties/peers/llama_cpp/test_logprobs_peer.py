"""llama.cpp's post-sampling probabilities, run for real (``llama_get_sampled_probs_ith`` after a
backend chain top_k -> top_p -> min_p -> temp -> dist on injected logit rows), against the oracle's
"llama.cpp-server" logprob variant (``oracle.logprobs``: log-softmax of the chain's output): the
same survivors, the probabilities within the shared softmax judge (``measure.check_softmax``), and
the log of each within the softmax model's relative bound (recorded in u)."""
from __future__ import annotations

import numpy as np
import pytest

from oracle import logprobs as olp
from oracle.engines import Settings
from oracle.engines import llama_cpp as o_llama
from properties import recording
from properties.measure import check_softmax
from properties.numerics import U32, softmax_model
from properties.peers.llama_cpp import adapter as peer

_REASON = peer.available()
if _REASON is not None and _REASON.startswith("llama_cpp is not importable"):
    pytest.skip(_REASON, allow_module_level=True)

from properties.peers.llama_cpp import backend_sampling as bs  # noqa: E402
from properties.samplers.strategies import make_logits  # noqa: E402

pytestmark = pytest.mark.peer
# (family, vocab, seed, top_k, top_p, min_p, t)
CASES = [("zipf", 64, 1, 10, 1.0, 0.0, 0.8), ("peaked", 64, 2, 0, 0.9, 0.05, 1.0), ("flat", 256, 3, 40, 0.95, 0.0, 1.5),
         ("neg_inf", 128, 4, 0, 1.0, 0.1, 0.7), ("one_finite", 32, 5, 0, 1.0, 0.0, 1.0), ("zipf", 1000, 6, 0, 0.8, 0.0, 1.0)]
TABLE: dict = {}


@pytest.mark.parametrize("family, vocab, seed, k, p, m, t", CASES)
def test_post_sampling_probs_match_the_oracle_variant(family, vocab, seed, k, p, m, t):
    row = make_logits(family, vocab, seed)
    steps = ([("top_k", {"k": k})] if k else []) + ([("top_p", {"p": p})] if p < 1 else []) \
        + ([("min_p", {"p": m})] if m else []) + [("temp", {"t": t}), ("dist", {"seed": 0})]
    res = bs.run(row[None, :], [steps])[0]
    if res.probs is None:
        pytest.skip("the backend returned no probabilities for this chain")
    p_hat = np.zeros(vocab)
    p_hat[res.ids] = res.probs.astype(np.float64)
    proc = o_llama.truncated(row.astype(np.float64), Settings(top_k=k, top_p=p, min_p=m, temperature=t)).dense_logits(vocab)
    lp = olp.VARIANTS["llama.cpp-server"](row, proc)
    live = np.isfinite(lp)
    same_support = bool(np.array_equal(p_hat > 0, live))
    rep, why = check_softmax(p_hat, proc)
    rel = softmax_model(proc).rel()
    with np.errstate(divide="ignore"):
        log_err = np.where(live & (p_hat > 0), np.abs(np.log(np.where(p_hat > 0, p_hat, 1.0)) - lp), 0.0)
    worst = int(np.argmax(log_err / (rel + 2 * U32)))
    TABLE[f"{family}/{vocab}/{seed} k{k} p{p} m{m} t{t}"] = dict(
        survivors=int(live.sum()), backend_nonzero=int((p_hat > 0).sum()), same_support=same_support,
        softmax_judge_u=round(rep.worst_u, 3), softmax_allow_u=round(rep.bound_u, 3),
        worst_log_err_u=round(float(log_err[worst] / U32), 3), log_allow_u=round(float((rel[worst] + 2 * U32) / U32), 3))
    recording.table("llama_cpp_post_sampling_logprobs", TABLE)
    assert same_support, f"survivors differ: backend {np.flatnonzero(p_hat > 0)[:12].tolist()}, oracle " \
                         f"{np.flatnonzero(live)[:12].tolist()}"
    assert why is None, why
    assert log_err[worst] <= rel[worst] + 2 * U32, TABLE
