"""Speculative decoding's verification step, in float64: the standard rejection sampler
(Leviathan et al. 2023; Chen et al. 2023) and llama.cpp's greedy-match acceptance.

Inputs of one sequence (no batch):

* ``p``: ``[K+1, V]`` target probabilities, *after* the target's own filter chain (rows 0..K-1
  for the K draft positions, row K for the bonus token). A token the chain dropped has p = 0.
  ``target_filter`` is that chain for the filters modelled here: top-k, then top-p (llama.cpp's
  default order), each keeping a prefix of the (probability descending, token id ascending)
  order and renormalising.
* ``q``: ``[K, V]`` draft probabilities; ``d``: ``[K]`` draft tokens (drawn from ``q``).
* ``a``: ``[K]`` uniforms for the acceptance tests, ``r``: ``[K+1]`` uniforms for the residual or
  bonus draw, each in [0, 1).

Semantics (the judge's spec):

* Position i accepts d_i iff ``a_i * q_i(d_i) < p_i(d_i)``, i.e. ``a_i < min(1, p/q)`` where
  q > 0. A draft drawn from q never has q(d) = 0; should one arrive, the rule above still
  decides it: accepted iff p(d) > 0 (the ratio is +inf), rejected where p(d) = 0 too. So a token
  the target excludes is never accepted, whatever q says.
* On the first rejection, emit the inverse-CDF draw (token order, first token whose running sum
  exceeds r_i·S) from the residual w = max(0, p_i - q_i), S = Σw, and stop. Where S = 0 (only
  possible when p_i <= q_i everywhere, i.e. p_i = q_i, and d_i was rejected for p(d_i) = 0) the
  draw is from p_i itself.
* If all K drafts are accepted, emit the bonus token drawn from p_K with r_K the same way.

Every emitted token has p > 0 (its weight is positive). The law of the first emitted token,
with d_0 drawn from q_0, is exactly p_0 (``first_token_law``).
"""
from __future__ import annotations

import numpy as np

__all__ = ["rejection_sample", "llama_cpp_greedy_match", "first_token_law", "first_token_law_given",
           "inverse_cdf", "accept_prob", "residual", "target_top_k", "target_top_p", "target_filter",
           "top_p_kept"]


def _rows(x: np.ndarray, name: str, ndim: int) -> np.ndarray:
    a = np.asarray(x, dtype=np.float64)
    if a.ndim != ndim or not np.isfinite(a).all() or (a < 0).any():
        raise ValueError(f"{name} must be a finite non-negative {ndim}-D array, got shape {a.shape}")
    return a


def inverse_cdf(w: np.ndarray, r: float) -> int:
    """The first token whose running sum of ``w`` exceeds r·Σw (token order); never a zero weight."""
    w = np.asarray(w, dtype=np.float64)
    cum = np.cumsum(w)
    s = cum[-1]
    if not s > 0:
        raise ValueError("no token has positive weight")
    j = int(np.searchsorted(cum, r * s, side="right"))  # cum jumps at j, so w[j] > 0
    if j >= w.size:  # r·S at the very top (r -> 1): the last live token
        j = int(np.flatnonzero(w > 0)[-1])
    return j


def accept_prob(p_d: float, q_d: float) -> float:
    """min(1, p/q); q = 0 -> 1 if p > 0 else 0 (see the module docstring)."""
    if q_d > 0:
        return min(1.0, p_d / q_d)
    return 1.0 if p_d > 0 else 0.0


def residual(p: np.ndarray, q: np.ndarray) -> np.ndarray:
    """The residual weights max(0, p - q), or p itself where they sum to 0."""
    w = np.maximum(np.asarray(p, np.float64) - np.asarray(q, np.float64), 0.0)
    return w if w.sum() > 0 else np.asarray(p, np.float64)


def rejection_sample(p: np.ndarray, q: np.ndarray, d: np.ndarray, a: np.ndarray, r: np.ndarray) -> list[int]:
    """The emitted tokens: the accepted drafts, then one residual or bonus token."""
    p, q = _rows(p, "p", 2), _rows(q, "q", 2)
    k = q.shape[0]
    if p.shape != (k + 1, q.shape[1]) or len(d) != k or len(a) != k or len(r) != k + 1:
        raise ValueError(f"shapes: p {p.shape}, q {q.shape}, d {len(d)}, a {len(a)}, r {len(r)}")
    out: list[int] = []
    for i in range(k):
        di = int(d[i])
        if a[i] * q[i, di] < p[i, di]:
            out.append(di)
            continue
        out.append(inverse_cdf(residual(p[i], q[i]), float(r[i])))
        return out
    out.append(inverse_cdf(p[k], float(r[k])))
    return out


def llama_cpp_greedy_match(target_tokens: np.ndarray, d: np.ndarray) -> list[int]:
    """llama.cpp's speculative acceptance (``common_sampler_sample_and_accept_n``): the target
    samples its own token t_i at each of the K+1 positions (with its own sampler and RNG); drafts
    are accepted while d_i == t_i, and the target's token is emitted at the first mismatch (or
    t_K when every draft matched). ``target_tokens``: [K+1], ``d``: [K]."""
    t = [int(x) for x in target_tokens]
    if len(t) != len(d) + 1:
        raise ValueError(f"{len(t)} target tokens for {len(d)} drafts; expected {len(d) + 1}")
    out: list[int] = []
    for ti, di in zip(t, d):
        out.append(ti)
        if ti != int(di):
            return out
    out.append(t[-1])
    return out


def first_token_law_given(p0: np.ndarray, q0: np.ndarray, d: int) -> np.ndarray:
    """The law of the first emitted token for a fixed draft d (a, r uniform):
    α·[j = d] + (1 - α)·residual_j/Σresidual, α = accept_prob(p(d), q(d)), from the values as given."""
    p0, q0 = np.asarray(p0, np.float64), np.asarray(q0, np.float64)
    alpha = accept_prob(p0[d], q0[d])
    w = residual(p0, q0)
    law = (1 - alpha) * w / w.sum()
    law[d] += alpha
    return law


def first_token_law(p0: np.ndarray, q0: np.ndarray) -> np.ndarray:
    """The law of the first emitted token with d_0 ~ q0/Σq0: Σ_d q̂(d)·first_token_law_given.
    For normalised p0, q0 this is p0 (min(p, q) + (1 - Σmin(p, q))·(p - q)⁺/Σ(p - q)⁺ = p)."""
    q0 = np.asarray(q0, np.float64)
    qh = q0 / q0.sum()
    out = np.zeros(q0.size)
    for d in np.flatnonzero(qh > 0):
        out += qh[d] * first_token_law_given(p0, q0, int(d))
    return out


def target_top_k(p: np.ndarray, k: int) -> np.ndarray:
    """The target's own top-k on a probability row, renormalised: exactly min(k, V) tokens kept,
    the largest; among tokens equal to the k-th largest value the lowest ids (gpu_impl's choice;
    which of them is kept is not part of the semantics: llama.cpp's sorts are unstable, and the
    judge accepts any choice of the right size, ``properties/speculative/filters.py``). k <= 0 or k >= V: the row as given. ([0.4, 0.3, 0.3, 0] with k = 2 -> [4/7, 3/7, 0, 0].)"""
    p = np.asarray(p, np.float64)
    if k <= 0 or k >= p.size:
        return p.copy()  # off: a no-op, the row as given
    order = np.lexsort((np.arange(p.size), -p))  # descending value, then lower id
    out = np.zeros_like(p)
    out[order[:k]] = p[order[:k]]
    return out / out.sum()


def top_p_kept(p: np.ndarray, top_p: float) -> int:
    """How many tokens llama.cpp's top-p keeps on a probability row (renormalised first): in
    (probability descending, token id ascending) order, through the first token whose cumulative
    mass reaches ``top_p`` (>=), at least one. ``top_p`` >= 1: every token with p > 0."""
    p = np.asarray(p, np.float64)
    live = int(np.count_nonzero(p > 0))
    if top_p >= 1:
        return live
    order = np.lexsort((np.arange(p.size), -p))
    cum = np.cumsum(p[order[:live]]) / p.sum()
    hit = np.flatnonzero(cum >= top_p)
    return int(hit[0]) + 1 if hit.size else live


def target_top_p(p: np.ndarray, top_p: float) -> np.ndarray:
    """The target's own top-p on a probability row, renormalised: the first ``top_p_kept`` tokens
    of the (probability descending, token id ascending) order; a token tied with the last kept one
    but later in that order is dropped. ``top_p`` >= 1: the row as given.
    ([0.4, 0.3, 0.3, 0] with top_p = 0.6 -> [4/7, 3/7, 0, 0].)"""
    p = np.asarray(p, np.float64)
    if top_p >= 1:
        return p.copy()  # off: a no-op, the row as given
    order = np.lexsort((np.arange(p.size), -p))
    keep = order[:top_p_kept(p, top_p)]
    out = np.zeros_like(p)
    out[keep] = p[keep]
    return out / out.sum()


def target_filter(p: np.ndarray, top_k: int = 0, top_p: float = 1.0) -> np.ndarray:
    """The target's filter chain on one probability row: top-k, then top-p on top-k's output."""
    return target_top_p(target_top_k(p, top_k), top_p)
