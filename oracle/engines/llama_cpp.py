"""llama.cpp = ``oracle.chain.default_chain``: this adapter maps a common ``Settings`` onto
``SamplingParams`` and runs that chain (penalties -> top_k -> typical -> top_p -> min_p ->
temperature (last) -> dist).

The penalty window is ``repeat_last_n`` (``penalty_last_n``) over prompt + output: llama.cpp's
server and CLI accept the prompt tokens into the sampler. min_keep 0 is llama.cpp's default.

Trait overrides (``TOGGLES``) run the chain with one semantic difference removed: temperature
moved to the front (``--samplers`` can put it there), min_p's threshold read in tempered space,
typical after min_p, top_k keeping every tie with the k-th logit, the penalty window stretched
over the whole history.
"""
from __future__ import annotations

import numpy as np

from oracle.candidates import TokenDataArray
from oracle.chain import DEFAULT_SEQUENCE, Chain, SamplingParams, default_chain
from oracle.engines.settings import Settings, first_noise, require, with_traits
from oracle.rng import Replay
from oracle.samplers import penalties
from oracle.samplers.base import Sampler

NAME = "llama.cpp"
SUPPORTS = frozenset({"temperature", "top_k", "top_p", "min_p", "typical_p", "repetition_penalty",
                      "presence_penalty", "frequency_penalty"})
TRAITS = dict(temp_first=False, min_p_space="pre-temperature", ties="exactly k", typical_position="before top_p",
              typical_ties="exactly", top_p_renormalises=True, min_p_before_top_p=False, min_p_equal_kept=True,
              window=True, freq_scope="prompt+output", penalty_order="repetition first", law="softmax",
              greedy="t <= 0", top_p_ties="exactly")
TOGGLES = frozenset({"temp_first", "min_p_space", "ties", "typical_position", "window"})


def _windowed(s: Settings, traits: dict) -> Settings:
    return s if traits["window"] else s.with_(repeat_last_n=max(len(s.history), 1))


def _penalty_sampler(s: Settings):
    smp = penalties(s.repeat_last_n, s.repetition_penalty, s.frequency_penalty, s.presence_penalty)
    for token in s.history:
        smp.accept(int(token))
    return smp


def penalised(logits: np.ndarray, s: Settings, **traits) -> np.ndarray:
    """The logits after the penalties sampler (the only stage that reads the history)."""
    require(NAME, SUPPORTS, s)
    cur = TokenDataArray.from_logits(logits)
    _penalty_sampler(_windowed(s, with_traits(NAME, TRAITS, TOGGLES, traits))).apply(cur)
    return cur.dense_logits(cur.size)


def _sequence(traits: dict) -> str:
    seq = DEFAULT_SEQUENCE
    if traits["typical_position"] == "after min_p":
        seq = seq.replace("y", "").replace("m", "my")
    if traits["temp_first"]:
        seq = seq.replace("t", "").replace("e", "et")
    return seq


def _min_p(s: Settings, traits: dict) -> float:
    """min_p as this chain must be given it so that its threshold is read in ``min_p_space``."""
    t, m = float(s.temperature), float(s.min_p)
    if not (t > 0 and m > 0):
        return m
    pre_space = traits["min_p_space"] == "pre-temperature"
    if pre_space and traits["temp_first"]:
        return m ** (1.0 / t)  # tempered threshold p^(1/T) = the untempered threshold p
    if not pre_space and not traits["temp_first"]:
        return m ** t
    return m


def _top_k(logits, s: Settings, traits: dict) -> int:
    """``top_k``, or with ties kept: the number of tokens at or above the k-th penalised logit."""
    k = int(s.top_k)
    if traits["ties"] == "exactly k" or k <= 0 or logits is None:
        return k
    y = penalised(logits, s, **{t: traits[t] for t in TOGGLES})
    if k >= y.size:
        return k
    return int((y >= np.sort(y)[::-1][k - 1]).sum())


def params(s: Settings, logits: np.ndarray | None = None, **traits) -> SamplingParams:
    require(NAME, SUPPORTS, s)
    tr = with_traits(NAME, TRAITS, TOGGLES, traits)
    if tr["ties"] != "exactly k" and logits is None:
        raise ValueError("top_k keeping ties needs the logits row")
    s = _windowed(s, tr)
    return SamplingParams(seed=0, top_k=_top_k(logits, s, tr), top_p=float(s.top_p), min_p=_min_p(s, tr),
                          temp=float(s.temperature), typ_p=float(s.typical_p), min_keep=0,
                          penalty_last_n=int(s.repeat_last_n), penalty_repeat=float(s.repetition_penalty),
                          penalty_freq=float(s.frequency_penalty), penalty_present=float(s.presence_penalty),
                          sequence=_sequence(tr))


def chain(s: Settings, n_vocab: int, u: float | None = None, logits: np.ndarray | None = None,
          selector: bool = True, **traits) -> Chain:
    c = default_chain(params(s, logits, **traits), n_vocab, selector)
    stateful = [m for m in c.members if type(m).accept is not Sampler.accept]  # the others ignore accept
    for token in _windowed(s, with_traits(NAME, TRAITS, TOGGLES, traits)).history:
        for m in stateful:
            m.accept(int(token))
    if u is not None:
        c.members[-1].rng = Replay(doubles=[u])
    return c


def truncated(logits: np.ndarray, s: Settings, **traits) -> TokenDataArray:
    """The candidate array ``dist`` receives."""
    cur = TokenDataArray.from_logits(logits)
    chain(s, cur.size, logits=logits, selector=False, **traits).apply(cur)
    return cur


def distribution(logits: np.ndarray, s: Settings, **traits) -> np.ndarray:
    return truncated(logits, s, **traits).distribution(np.asarray(logits).size)


def sample(logits: np.ndarray, s: Settings, noise) -> int:
    """dist's inverse CDF in the array's current order (descending after top_k) at one double."""
    cur = TokenDataArray.from_logits(logits)
    chain(s, cur.size, first_noise(noise)).apply(cur)
    return cur.selected_token
