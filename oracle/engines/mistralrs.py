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

from oracle.candidates import descending_order
from oracle.engines.settings import (Settings, as_row, counts, first_argmax_onehot, first_noise,
                                     inverse_cdf, require, softmax, with_traits)

NAME = "mistral.rs"
SUPPORTS = frozenset({"temperature", "top_k", "top_p", "min_p", "repetition_penalty", "presence_penalty",
                      "frequency_penalty"})
TRAITS = dict(temp_first=True, min_p_space="post-temperature", ties="exactly k", typical_position=None,
              typical_ties=None, top_p_renormalises=False, min_p_before_top_p=False, min_p_equal_kept=False,
              window=False, freq_scope="prompt+output", penalty_order="frequency/presence first", law="softmax",
              greedy="t <= 0", top_p_ties="exactly")
# top_k keeping every tie with the k-th, top_p on renormalised top-k mass, min_p keeping
# p = min_p·p_max, repetition before frequency/presence
TOGGLES = frozenset({"ties", "top_p_renormalises", "min_p_equal_kept", "penalty_order"})


def penalties(x: np.ndarray, history, repetition: float, frequency: float, presence: float,
              repetition_first: bool = False) -> np.ndarray:
    c = counts(history, x.size).astype(np.float64)
    r = float(repetition)

    def repeat(y):
        return np.where(c > 0, np.where(y > 0, y / r, y * r), y) if r != 1.0 else y

    def subtract(y):
        return y - c * frequency - (c > 0) * presence
    return subtract(repeat(x)) if repetition_first else repeat(subtract(x))


def truncate(probs: np.ndarray, k: int, p: float, p_min: float, keep_ties: bool = False, renormalise: bool = False,
             equal_kept: bool = False) -> np.ndarray:
    """top_k, top_p, min_p on probabilities, by zeroing, in that order, never renormalising (the
    keyword switches are trait overrides: each removes one difference from the other engines)."""
    out = probs.copy()
    order = descending_order(probs)
    kk = int(k) if int(k) > 0 else probs.size
    if keep_ties and kk < probs.size:
        kk = int((probs >= probs[order[kk - 1]]).sum())
    out[order[kk:]] = 0.0
    top = order[:kk]
    if 0.0 < float(p) < 1.0:
        mass = probs[top] / probs[top].sum() if renormalise else probs[top]
        before = np.concatenate([[0.0], np.cumsum(mass)[:-1]])  # running sum before each token
        out[top[before >= float(p)]] = 0.0
    if 0.0 < float(p_min) < 1.0:
        threshold = probs[top[0]] * float(p_min)
        out[top[(threshold > probs[top]) if equal_kept else (threshold >= probs[top])]] = 0.0
    return out


def penalised(logits: np.ndarray, s: Settings, **traits) -> np.ndarray:
    require(NAME, SUPPORTS, s)
    tr = with_traits(NAME, TRAITS, TOGGLES, traits)
    x = as_row(logits)
    if s.repetition_penalty != 1.0 or s.frequency_penalty != 0.0 or s.presence_penalty != 0.0:
        x = penalties(x, s.history, s.repetition_penalty, s.frequency_penalty, s.presence_penalty,
                      repetition_first=tr["penalty_order"] == "repetition first")
    return x


def weights(logits: np.ndarray, s: Settings, **traits) -> np.ndarray:
    """The (un-normalised) weight vector handed to ``WeightedIndex``."""
    tr = with_traits(NAME, TRAITS, TOGGLES, traits)
    x = penalised(logits, s, **traits)
    if not float(s.temperature) > 0:
        return first_argmax_onehot(x)
    return truncate(softmax(x / float(s.temperature)), s.top_k, s.top_p, s.min_p, keep_ties=tr["ties"] == "keeps ties",
                    renormalise=tr["top_p_renormalises"], equal_kept=tr["min_p_equal_kept"])


def distribution(logits: np.ndarray, s: Settings, **traits) -> np.ndarray:
    w = weights(logits, s, **traits)
    return w / w.sum()


def sample(logits: np.ndarray, s: Settings, noise) -> int:
    return inverse_cdf(weights(logits, s), first_noise(noise), strict=True)
