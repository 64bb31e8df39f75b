"""HF transformers' ``generate(do_sample=True)`` semantics, float64 (transformers 5.x,
``generation/logits_process.py``).

Order: processors (repetition penalty) -> Temperature -> TopK -> TopP -> MinP -> Typical ->
Epsilon -> Eta, then ``torch.multinomial`` on the softmax. Each warper rewrites scores to -inf;
none renormalises, so a later warper's softmax is over the survivors.

Ties. HF sorts with ``torch.sort`` (not stable on CPU): among tokens with equal scores at a top_p
or typical boundary, which ones are removed is unspecified. This oracle removes lower ids first
(a stable ascending sort); comparisons treat equal-score tokens as interchangeable.
"""
from __future__ import annotations

import math

import numpy as np

from oracle.candidates import ascending_order, descending_order
from oracle.engines.settings import (Settings, as_row, first_noise, inverse_cdf, log_softmax, require, softmax,
                                     with_traits)

NAME = "transformers"
SUPPORTS = frozenset({"temperature", "top_k", "top_p", "min_p", "typical_p", "epsilon", "eta",
                      "repetition_penalty"})
TRAITS = dict(temp_first=True, min_p_space="post-temperature", ties="keeps ties", typical_position="after min_p",
              typical_ties="keeps ties", top_p_renormalises=True, min_p_before_top_p=False, min_p_equal_kept=True,
              window=False, freq_scope=None, penalty_order="repetition first", law="softmax", greedy=None, top_p_ties="exactly")
TOGGLES = frozenset({"typical_ties"})  # typical cut exactly after the crossing position
NEG_INF = -np.inf


def _min_keep(min_tokens_to_keep: int) -> int:
    if int(min_tokens_to_keep) < 1:
        raise ValueError(f"min_tokens_to_keep={min_tokens_to_keep} must be a positive integer")
    return int(min_tokens_to_keep)


def temperature(scores: np.ndarray, t: float) -> np.ndarray:
    """``scores / t``; t <= 0 is rejected (HF: 'use do_sample=False' for greedy)."""
    if not float(t) > 0 or not math.isfinite(float(t)):
        raise ValueError(f"temperature={t} must be a strictly positive float (transformers rejects it; "
                         "greedy decoding is do_sample=False)")
    return scores / float(t)


def top_k(scores: np.ndarray, k: int, min_tokens_to_keep: int = 1) -> np.ndarray:
    """Remove scores below the k-th largest: every token tied with the k-th value stays."""
    if int(k) <= 0:
        raise ValueError(f"top_k={k} must be a strictly positive integer")
    kk = min(max(int(k), _min_keep(min_tokens_to_keep)), scores.size)
    kth = np.sort(scores)[::-1][kk - 1]
    return np.where(scores < kth, NEG_INF, scores)


def top_p(scores: np.ndarray, p: float, min_tokens_to_keep: int = 1) -> np.ndarray:
    """Ascending order; drop the prefix whose cumulative softmax is <= 1 - p, never the last
    ``min_tokens_to_keep`` (the largest)."""
    if not 0.0 <= float(p) <= 1.0:
        raise ValueError(f"top_p={p} must lie in [0, 1]")
    mk = _min_keep(min_tokens_to_keep)
    order = ascending_order(scores)
    cum = np.cumsum(softmax(scores[order]))
    remove = cum <= 1.0 - float(p)
    remove[max(scores.size - mk, 0):] = False
    out = scores.copy()
    out[order[remove]] = NEG_INF
    return out


def _restore_top(remove: np.ndarray, key: np.ndarray, n: int) -> np.ndarray:
    """Un-remove the ``n`` largest by ``key`` (descending, lower id first among ties)."""
    top = descending_order(key)[: min(n, key.size)]
    out = remove.copy()
    out[top] = False
    return out


def min_p(scores: np.ndarray, p_min: float, min_tokens_to_keep: int = 1) -> np.ndarray:
    """Remove probs < p_min · max prob (equality kept) on the softmax of these (tempered) scores."""
    if not 0.0 <= float(p_min) <= 1.0:
        raise ValueError(f"min_p={p_min} must lie in [0, 1]")
    probs = softmax(scores)
    remove = _restore_top(probs < float(p_min) * probs.max(), probs, _min_keep(min_tokens_to_keep))
    return np.where(remove, NEG_INF, scores)


def typical(scores: np.ndarray, mass: float, min_tokens_to_keep: int = 1, keep_ties: bool = True) -> np.ndarray:
    """Order by |-log p - H| ascending; keep up to and including the first position whose
    cumulative probability reaches ``mass`` (``count(cum < mass)``), plus every token scoring
    equal to that boundary one (not with ``keep_ties=False``); the first ``min_tokens_to_keep``
    in that order always stay."""
    if not 0.0 < float(mass) < 1.0:
        raise ValueError(f"typical_p={mass} must lie in (0, 1)")
    logp = log_softmax(scores)
    p = np.exp(logp)
    with np.errstate(invalid="ignore"):
        entropy = -np.nansum(logp * p)
        shifted = np.abs(-logp - entropy)
    order = ascending_order(shifted)
    cum = np.cumsum(softmax(scores[order]))
    last = min(int((cum < float(mass)).sum()), scores.size - 1)
    remove = shifted[order] > shifted[order][last] if keep_ties else np.arange(scores.size) > last
    remove[: _min_keep(min_tokens_to_keep)] = False
    out = scores.copy()
    out[order[remove]] = NEG_INF
    return out


def _below_and_not_top(probs: np.ndarray, cut: float, scores: np.ndarray, mk: int) -> np.ndarray:
    kth = np.sort(scores)[::-1][min(mk, scores.size) - 1]
    return (probs < cut) & (scores < kth)


def epsilon(scores: np.ndarray, eps: float, min_tokens_to_keep: int = 1) -> np.ndarray:
    """Remove p < eps unless the score is at least the ``min_tokens_to_keep``-th largest."""
    if not 0.0 < float(eps) < 1.0:
        raise ValueError(f"epsilon={eps} must lie in (0, 1)")
    remove = _below_and_not_top(softmax(scores), float(eps), scores, _min_keep(min_tokens_to_keep))
    return np.where(remove, NEG_INF, scores)


def eta_cutoff(scores: np.ndarray, eps: float) -> float:
    """``min(eps, sqrt(eps) · exp(-H))`` as the code computes it. The docstring says
    ``min(eps, sqrt(eps · exp(-H)))``, which is larger whenever exp(-H) < 1 (documented mismatch)."""
    probs = softmax(scores)
    logp = np.maximum(log_softmax(scores), np.finfo(np.float64).min)  # Categorical clamps -inf
    h = float(-(logp * probs).sum())
    return min(float(eps), math.sqrt(float(eps)) * math.exp(-h))


def eta(scores: np.ndarray, eps: float, min_tokens_to_keep: int = 1) -> np.ndarray:
    if not 0.0 < float(eps) < 1.0:
        raise ValueError(f"eta epsilon={eps} must lie in (0, 1)")
    remove = _below_and_not_top(softmax(scores), eta_cutoff(scores, eps), scores, _min_keep(min_tokens_to_keep))
    return np.where(remove, NEG_INF, scores)


def repetition_penalty(scores: np.ndarray, ids, penalty: float) -> np.ndarray:
    """Once per distinct id in ``ids`` (prompt + output, no window): s < 0 -> s·penalty, else s/penalty."""
    if not float(penalty) > 0:
        raise ValueError(f"repetition_penalty={penalty} must be a strictly positive float")
    seen = np.unique(np.asarray([i for i in ids if 0 <= int(i) < scores.size], dtype=np.int64))
    out = scores.copy()
    s = out[seen]
    out[seen] = np.where(s < 0, s * float(penalty), s / float(penalty))
    return out


def penalised(logits: np.ndarray, s: Settings, **traits) -> np.ndarray:
    """The scores after the logits processors (the only stage that reads the history)."""
    require(NAME, SUPPORTS, s)
    with_traits(NAME, TRAITS, TOGGLES, traits)
    x = as_row(logits)
    if s.repetition_penalty != 1.0 and s.history:
        x = repetition_penalty(x, s.history, s.repetition_penalty)
    return x


def processed(logits: np.ndarray, s: Settings, **traits) -> np.ndarray:
    """The scores ``generate`` hands to multinomial (before softmax), -inf for removed tokens."""
    tr = with_traits(NAME, TRAITS, TOGGLES, traits)
    x = penalised(logits, s)
    if not float(s.temperature) > 0:
        temperature(x, s.temperature)  # raises: HF has no sampling at t <= 0
    mk = s.min_tokens_to_keep
    if s.temperature != 1.0:
        x = temperature(x, s.temperature)
    if s.top_k > 0:
        x = top_k(x, s.top_k, mk)
    if s.top_p < 1.0:
        x = top_p(x, s.top_p, mk)
    if s.min_p > 0.0:
        x = min_p(x, s.min_p, mk)
    if s.typical_p < 1.0:
        x = typical(x, s.typical_p, mk, keep_ties=tr["typical_ties"] == "keeps ties")
    if s.epsilon > 0.0:
        x = epsilon(x, s.epsilon, mk)
    if s.eta > 0.0:
        x = eta(x, s.eta, mk)
    return x


def distribution(logits: np.ndarray, s: Settings, **traits) -> np.ndarray:
    return softmax(processed(logits, s, **traits))


def sample(logits: np.ndarray, s: Settings, noise) -> int:
    """A model of ``torch.multinomial``: inverse CDF in vocab order at the first uniform (torch's
    own draw is not reproduced bit for bit; only its distribution is HF's)."""
    return inverse_cdf(distribution(logits, s), first_noise(noise))
