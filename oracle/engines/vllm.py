"""vLLM v1 sampler semantics, float64 (``v1/sample/sampler.py``, ``ops/penalties``,
``ops/topk_topp_sampler.py``, builtin ``MinPLogitsProcessor``).

Order: penalties -> temperature -> min_p -> top_k/top_p -> exponential race.
- repetition over prompt + output (l > 0 ? l/r : l·r, once per distinct id), then
  frequency·count and presence·[count > 0] subtracted, counts over the *output* only;
- temperature < 1e-5 (``_SAMPLING_EPS``) means greedy: argmax of the penalised logits;
- min_p: remove softmax < min_p · max (equality kept), no min_keep;
- top_k / top_p on one ascending sort: top_k removes l < the k-th largest (ties kept, as HF);
  top_p removes the ascending prefix with cumulative softmax (of the top-k survivors) <= 1 - p,
  the largest always kept. k <= 0 or k >= V and p >= 1 are off;
- sampling: argmax(p / q) with q ~ Exp(1) per token (the exponential race), which selects token
  i with probability exactly p_i.
"""
from __future__ import annotations

import numpy as np

from oracle.candidates import ascending_order
from oracle.engines.settings import (Settings, as_row, counts, first_argmax_onehot, require, softmax,
                                     uniforms, with_traits)

NAME = "vllm"
SUPPORTS = frozenset({"temperature", "top_k", "top_p", "min_p", "repetition_penalty", "presence_penalty",
                      "frequency_penalty"})
TRAITS = dict(temp_first=True, min_p_space="post-temperature", ties="keeps ties", typical_position=None,
              typical_ties=None, top_p_renormalises=True, min_p_before_top_p=True, min_p_equal_kept=True,
              window=False, freq_scope="output", penalty_order="repetition first", law="softmax",
              greedy="t < 1e-5", top_p_ties="exactly")
# min_p after top_k/top_p, presence/frequency counting the prompt too, greedy only at t <= 0
TOGGLES = frozenset({"min_p_before_top_p", "freq_scope", "greedy"})
SAMPLING_EPS = 1e-5
NEG_INF = -np.inf


def penalties(x: np.ndarray, prompt, output, repetition: float, frequency: float, presence: float) -> np.ndarray:
    if not float(repetition) > 0:
        raise ValueError(f"repetition_penalty={repetition} must be > 0")
    seen = (counts(prompt, x.size) + counts(output, x.size)) > 0
    out_counts = counts(output, x.size).astype(np.float64)
    r = float(repetition)
    y = np.where(seen, np.where(x > 0, x / r, x * r), x)
    return y - frequency * out_counts - presence * (out_counts > 0)


def min_p(x: np.ndarray, p_min: float) -> np.ndarray:
    probs = softmax(x)
    return np.where(probs < float(p_min) * probs.max(), NEG_INF, x)


def top_k_top_p(x: np.ndarray, k: int, p: float) -> np.ndarray:
    """The sort-based path: one ascending sort (lower ids first among ties, see transformers)."""
    v = x.size
    use_k, use_p = 0 < int(k) < v, float(p) < 1.0
    if not (use_k or use_p):
        return x.copy()
    order = ascending_order(x)
    srt = x[order].copy()
    if use_k:
        srt[srt < srt[v - int(k)]] = NEG_INF
    if use_p:
        cum = np.cumsum(softmax(srt))
        drop = cum <= 1.0 - float(p)
        drop[-1] = False
        srt[drop] = NEG_INF
    out = np.empty_like(x)
    out[order] = srt
    return out


def greedy(s: Settings, **traits) -> bool:
    """``_SAMPLING_EPS``; toggled to any other rule, greedy only at t <= 0."""
    if with_traits(NAME, TRAITS, TOGGLES, traits)["greedy"] == TRAITS["greedy"]:
        return float(s.temperature) < SAMPLING_EPS
    return not float(s.temperature) > 0


def penalised(logits: np.ndarray, s: Settings, **traits) -> np.ndarray:
    require(NAME, SUPPORTS, s)
    x = as_row(logits)
    prompt, output = s.prompt, s.output
    if with_traits(NAME, TRAITS, TOGGLES, traits)["freq_scope"] == "prompt+output":
        prompt, output = (), s.history  # repetition sees the same tokens either way
    if s.repetition_penalty != 1.0 or s.frequency_penalty != 0.0 or s.presence_penalty != 0.0:
        x = penalties(x, prompt, output, s.repetition_penalty, s.frequency_penalty, s.presence_penalty)
    return x


def processed(logits: np.ndarray, s: Settings, **traits) -> np.ndarray:
    """Logits the race runs on (-inf = removed); at greedy temperatures the argmax only."""
    x = penalised(logits, s, **traits)
    if greedy(s, **traits):
        return np.where(first_argmax_onehot(x) > 0, x, NEG_INF)
    x = x / float(s.temperature)
    min_p_first = with_traits(NAME, TRAITS, TOGGLES, traits)["min_p_before_top_p"]
    if s.min_p > 0.0 and min_p_first:
        x = min_p(x, s.min_p)
    x = top_k_top_p(x, s.top_k, s.top_p)
    return min_p(x, s.min_p) if s.min_p > 0.0 and not min_p_first else x


def distribution(logits: np.ndarray, s: Settings, **traits) -> np.ndarray:
    return softmax(processed(logits, s, **traits))


def exponentials(noise, n: int) -> np.ndarray:
    """q = -log(1 - u): Exp(1) from uniforms in [0, 1) (u = 0 gives q = 0, p/q = inf: allowed)."""
    return -np.log1p(-uniforms(noise, n))


def race(probs: np.ndarray, q: np.ndarray) -> int:
    """argmax(p / q), first index on ties; p = 0 never wins (0/q = 0 < any positive p / q)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        score = np.where(probs > 0, probs / q, -1.0)
    return int(np.argmax(score))


def sample(logits: np.ndarray, s: Settings, noise) -> int:
    probs = distribution(logits, s)
    if greedy(s):
        return int(np.argmax(probs))
    return race(probs, exponentials(noise, probs.size))
