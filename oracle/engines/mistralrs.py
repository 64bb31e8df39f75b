"""mistral.rs sampler semantics, float64: the Python package ``mistralrs`` 0.9.5 (CPU wheel), as
its real sampler answers on logit-injection models (``properties/peers/mistralrs``). Upstream
source: ``mistralrs-core/src/sampler.rs`` (``Sampler::sample_top_kp_min_p``,
``apply_freq_pres_rep_penalty``; read at github.com/EricLBuehler/mistral.rs commit 9e922623f, whose
Cargo version says 0.9.2 - every trait below was checked on the 0.9.5 wheel except where noted).

- penalties: presence/frequency count the *generated* tokens only (l -= c·frequency +
  [c > 0]·presence), *then* repetition over every seen token, prompt included (l > 0 ? l/r : l·r)
  - the reverse of llama.cpp's order; no window;
- probabilities = softmax(l / T); T < 1e-7 is greedy (the first argmax); an unset temperature
  samples at T = 1 in the Python API (the wheel's default, measured);
- top_k: in descending order, zero every probability after the k-th (exactly k; ties broken by
  an unstable partial sort there, by lower id here);
- top_p: on the top-k list, cutoff = p · (sum of the top-k probabilities): the renormalised
  top-k mass, as llama.cpp; a token is zeroed once the running sum before it reached the cutoff;
- min_p: zero every probability p with p <= min_p · p_max (equality removed, unlike HF/vLLM:
  from the source; a float32 knife edge the black box cannot show);
- no renormalisation: the zeroed vector is handed to ``WeightedIndex``, which normalises only
  implicitly (first index whose cumulative weight exceeds u · total);
- logprobs / top_logprobs report softmax(penalised / T): tempered, before every filter.
"""
from __future__ import annotations

import numpy as np

from oracle.candidates import descending_order
from oracle.engines.settings import (Settings, as_row, counts, first_argmax_onehot, first_noise,
                                     inverse_cdf, require, softmax, with_traits)

NAME = "mistral.rs"
PEER = "mistralrs 0.9.5, CPU wheel (properties/peers/mistralrs)"  # the real engine this variant is judged against, at its pinned release
SUPPORTS = frozenset({"temperature", "top_k", "top_p", "min_p", "repetition_penalty", "presence_penalty",
                      "frequency_penalty"})
TRAITS = dict(temp_first=True, min_p_space="post-temperature", ties="exactly k", typical_position=None,
              typical_ties=None, top_p_renormalises=True, min_p_before_top_p=False, min_p_equal_kept=False,
              window=False, freq_scope="output", penalty_order="frequency/presence first", law="softmax",
              greedy="t < 1e-7", top_p_ties="exactly")  # Sampler::new: a temperature below 1e-7 is None
# top_k keeping every tie with the k-th, top_p on the un-renormalised top-k mass, min_p keeping
# p = min_p·p_max, repetition before frequency/presence, presence/frequency over prompt + output,
# another engine's greedy rule
TOGGLES = frozenset({"ties", "top_p_renormalises", "min_p_equal_kept", "penalty_order", "freq_scope", "greedy"})


def penalties(x: np.ndarray, history, repetition: float, frequency: float, presence: float,
              repetition_first: bool = False, counted=None) -> np.ndarray:
    """Repetition over every token of ``history``; presence/frequency over ``counted`` (the
    generated tokens; None: the whole history)."""
    seen = counts(history, x.size) > 0
    c = counts(history if counted is None else counted, x.size).astype(np.float64)
    r = float(repetition)

    def repeat(y):
        return np.where(seen, np.where(y > 0, y / r, y * r), y) if r != 1.0 else y

    def subtract(y):
        return y - c * frequency - (c > 0) * presence
    return subtract(repeat(x)) if repetition_first else repeat(subtract(x))


def truncate(probs: np.ndarray, k: int, p: float, p_min: float, keep_ties: bool = False, renormalise: bool = False,
             equal_kept: bool = False) -> np.ndarray:
    """top_k, top_p, min_p on probabilities, by zeroing, in that order; the weights are never
    renormalised, top_p's cutoff is (``renormalise``: p times the top-k mass). The keyword switches
    are trait overrides: each removes one difference from the other engines."""
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
                      repetition_first=tr["penalty_order"] == "repetition first",
                      counted=s.output if tr["freq_scope"] == "output" else None)
    return x


def weights(logits: np.ndarray, s: Settings, **traits) -> np.ndarray:
    """The (un-normalised) weight vector handed to ``WeightedIndex``."""
    tr = with_traits(NAME, TRAITS, TOGGLES, traits)
    x = penalised(logits, s, **traits)
    from oracle.engines.mapping import greedy_at  # the one reading of a greedy rule (mapping imports this module)

    if greedy_at(tr["greedy"], float(s.temperature)):
        return first_argmax_onehot(x)
    return truncate(softmax(x / float(s.temperature)), s.top_k, s.top_p, s.min_p, keep_ties=tr["ties"] == "keeps ties",
                    renormalise=tr["top_p_renormalises"], equal_kept=tr["min_p_equal_kept"])


def distribution(logits: np.ndarray, s: Settings, **traits) -> np.ndarray:
    w = weights(logits, s, **traits)
    return w / w.sum()


def sample(logits: np.ndarray, s: Settings, noise) -> int:
    return inverse_cdf(weights(logits, s), first_noise(noise), strict=True)
