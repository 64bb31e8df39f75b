"""llama.cpp = ``oracle.chain.default_chain``: this adapter maps a common ``Settings`` onto
``SamplingParams`` and runs that chain (penalties -> top_k -> typical -> top_p -> min_p ->
temperature (last) -> dist).

The penalty window is ``repeat_last_n`` (``penalty_last_n``) over prompt + output: llama.cpp's
server and CLI accept the prompt tokens into the sampler. min_keep 0 is llama.cpp's default.
"""
from __future__ import annotations

import numpy as np

from oracle.candidates import TokenDataArray
from oracle.chain import Chain, SamplingParams, default_chain
from oracle.engines.settings import Settings, first_noise, require
from oracle.rng import Replay

NAME = "llama.cpp"
SUPPORTS = frozenset({"temperature", "top_k", "top_p", "min_p", "typical_p", "repetition_penalty",
                      "presence_penalty", "frequency_penalty"})


def params(s: Settings) -> SamplingParams:
    require(NAME, SUPPORTS, s)
    return SamplingParams(seed=0, top_k=int(s.top_k), top_p=float(s.top_p), min_p=float(s.min_p),
                          temp=float(s.temperature), typ_p=float(s.typical_p), min_keep=0,
                          penalty_last_n=int(s.repeat_last_n), penalty_repeat=float(s.repetition_penalty),
                          penalty_freq=float(s.frequency_penalty), penalty_present=float(s.presence_penalty))


def chain(s: Settings, n_vocab: int, u: float | None = None) -> Chain:
    c = default_chain(params(s), n_vocab)
    for token in s.history:
        c.accept(int(token))
    if u is not None:
        c.members[-1].rng = Replay(doubles=[u])
    return c


def truncated(logits: np.ndarray, s: Settings) -> TokenDataArray:
    """The candidate array ``dist`` receives."""
    cur = TokenDataArray.from_logits(logits)
    for member in chain(s, cur.size).members[:-1]:
        member.apply(cur)
    return cur


def distribution(logits: np.ndarray, s: Settings) -> np.ndarray:
    return truncated(logits, s).distribution(np.asarray(logits).size)


def sample(logits: np.ndarray, s: Settings, noise) -> int:
    """dist's inverse CDF in the array's current order (descending after top_k) at one double."""
    cur = TokenDataArray.from_logits(logits)
    chain(s, cur.size, first_noise(noise)).apply(cur)
    return cur.selected_token
