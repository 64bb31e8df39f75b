"""mistral.rs sampler semantics, float64 (``mistralrs-core/src/sampler.rs``, the CPU path with
``sample_top_kp_min_p`` and the independent min_p block).

- penalties over the context (prompt + output): l -= count·frequency + [count > 0]·presence,
  *then* repetition (l > 0 ? l/r : l·r) — the reverse of llama.cpp's order;
- probabilities = softmax(l / T); T <= 0 is taken as greedy (argmax), mistral.rs' temperature=None;
- top_k: in descending order, zero every probability after the k-th (exactly k; ties broken by
  lower id here, by an unstable sort there);
- top_p: walk the top-k list in order keeping a running sum of the *un-renormalised*
  probabilities; a token is zeroed once the sum already reached p (so the crossing token stays);
- min_p: zero every probability p with p <= min_p · p_max (equality removed, unlike HF/vLLM);
- no renormalisation: the zeroed vector is handed to ``WeightedIndex``, which normalises only
  implicitly (first index whose cumulative weight exceeds u · total).
"""
from __future__ import annotations

import numpy as np

from oracle.engines.settings import (Settings, as_row, counts, first_argmax_onehot, first_noise,
                                     inverse_cdf, require, softmax)

NAME = "mistral.rs"
SUPPORTS = frozenset({"temperature", "top_k", "top_p", "min_p", "repetition_penalty", "presence_penalty",
                      "frequency_penalty"})


def penalties(x: np.ndarray, history, repetition: float, frequency: float, presence: float) -> np.ndarray:
    c = counts(history, x.size).astype(np.float64)
    y = x - c * frequency - (c > 0) * presence
    if float(repetition) != 1.0:
        r = float(repetition)
        y = np.where(c > 0, np.where(y > 0, y / r, y * r), y)
    return y


def truncate(probs: np.ndarray, k: int, p: float, p_min: float) -> np.ndarray:
    """top_k, top_p, min_p on probabilities, by zeroing, in that order, never renormalising."""
    out = probs.copy()
    order = np.argsort(-probs, kind="stable")
    kk = int(k) if int(k) > 0 else probs.size
    out[order[kk:]] = 0.0
    top = order[:kk]
    if 0.0 < float(p) < 1.0:
        before = np.concatenate([[0.0], np.cumsum(probs[top])[:-1]])  # running sum before each token
        out[top[before >= float(p)]] = 0.0
    if 0.0 < float(p_min) < 1.0:
        threshold = probs[top[0]] * float(p_min)
        out[top[threshold >= probs[top]]] = 0.0
    return out


def weights(logits: np.ndarray, s: Settings) -> np.ndarray:
    """The (un-normalised) weight vector handed to ``WeightedIndex``."""
    require(NAME, SUPPORTS, s)
    x = as_row(logits)
    if s.repetition_penalty != 1.0 or s.frequency_penalty != 0.0 or s.presence_penalty != 0.0:
        x = penalties(x, s.history, s.repetition_penalty, s.frequency_penalty, s.presence_penalty)
    if not float(s.temperature) > 0:
        return first_argmax_onehot(x)
    return truncate(softmax(x / float(s.temperature)), s.top_k, s.top_p, s.min_p)


def distribution(logits: np.ndarray, s: Settings) -> np.ndarray:
    w = weights(logits, s)
    return w / w.sum()


def sample(logits: np.ndarray, s: Settings, noise) -> int:
    return inverse_cdf(weights(logits, s), first_noise(noise), strict=True)
