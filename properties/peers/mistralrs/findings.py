"""Replays of the mistral.rs ledger entries (``properties/peers/llama_cpp/findings.py`` holds the
one ledger; entries naming ``engine="mistral.rs"`` replay through these). Each returns (what
mistral.rs gives, what the reference gives) in the recorded shapes."""
from __future__ import annotations

import numpy as np

from oracle.engines import Settings
from oracle.engines import mistralrs as o_mrs


def seed_ignored() -> tuple[dict, dict]:
    """Two Runners, one with seed=1, on four equal logits: the same 20 first tokens."""
    import mistralrs

    from properties.peers.mistralrs import adapter

    s = Settings(prompt=(3,))
    with adapter.engine(adapter.with_specials([0.0] * 4)) as e:
        first = e.draws(s, 20, per_request=1).tolist()
        other = adapter.Engine.__new__(adapter.Engine)
        other.m, other.row, other.dir = mistralrs, e.row, e.dir
        other.runner = mistralrs.Runner(which=mistralrs.Which.GGUF(quantized_model_id=str(e.dir),
                                                                   quantized_filename="m.gguf"),
                                        no_paged_attn=True, seed=1)
        again = other.draws(s, 20, per_request=1).tolist()
    return {"same draws": first == again}, {"same draws": False}


def logprobs_before_filters() -> tuple[dict, dict]:
    """top_k = 1 on logits [1, 0]: the reported top_logprobs still give token 1 (removed)
    ln softmax = -1.313, not -inf: the report is the distribution before top_k / top_p / min_p."""
    from properties.peers.mistralrs import adapter

    with adapter.engine(adapter.with_specials([1.0, 0.0])) as e:
        step = e.steps(Settings(top_k=1, prompt=(3,)), 1)[0]
    law = o_mrs.distribution(adapter.with_specials([1.0, 0.0]), Settings(top_k=1))
    return {"reported logprob of token 4": round(step.top[4], 3)}, {"sampling probability of token 4": float(law[4])}


def unset_temperature_samples() -> tuple[dict, dict]:
    """No temperature in the request, logits [0, 0, 0, 0]: 40 first tokens are not all one token
    (T = 1 sampling); the upstream source (commit 9e922623f) makes an unset temperature greedy."""
    from properties.peers.mistralrs import adapter

    with adapter.engine(adapter.with_specials([0.0] * 4)) as e:
        res = e.runner.send_chat_completion_request(e.m.ChatCompletionRequest(
            messages="t3", model="x", max_tokens=1, n_choices=40))
    from properties.peers.mistralrs.injection import token_id
    ids = {token_id(c.message.content) for c in res.choices}
    return {"distinct tokens": len(ids) > 1}, {"distinct tokens": False}
