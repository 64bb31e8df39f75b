"""Near-threshold speculative-sampling bugs: each replaces gpu_impl's ``rejection_sample``.

* ``speculative_boundary_ties_accepted``: the target's top-k kept set is every token >= the k-th
  value, so tokens tied at the cut keep their probability (a fused rejection-sampling kernel
  that ranked by value alone: [0.4, 0.3, 0.3, 0] with k = 2 kept three tokens; the fix orders
  by (probability, token id)).
* ``speculative_top_p_boundary_ties``: the target's top-p finds the crossing token correctly
  (cumulative mass >= p over the descending sort) but keeps every token >= the crossing token's
  probability, so tokens tied with it past the cut keep their probability too (the same
  value-only ranking at the top-p cut: [0.4, 0.3, 0.3, 0] with top_p = 0.55 kept three tokens).
* ``speculative_tile_edge``: the residual's (and the bonus') normaliser and CDF walk whole
  1,024-wide tiles only, so the last partial tile is lost (vocabulary 8,193 loses token 8,192;
  rejection samplers regressed at such vocabulary-boundary tiles, 8,193 and 151,936).

``SPECULATIVE_MUTANTS`` holds them as ``NearMutant``s of domain "speculative"; ``DOMAIN`` is the
runner's domain (the room's property table and these mutants), hunted by
``properties/zoo/test_speculative_mutants.py`` and by ``properties.speculative.figures``.
"""
from __future__ import annotations

from types import ModuleType
from typing import Any, Callable

import numpy as np

from gpu_impl import speculative as gs
from properties.speculative import PROPERTIES
from properties.zoo.near_threshold import NearMutant
from properties.zoo.runner import Domain, Mutant, host, like, replaced, swapped

TILE = 1024


def _settings(p: np.ndarray, top_k: Any, top_p: Any) -> tuple[np.ndarray, np.ndarray]:
    """Per-row settings on the host (scalars, NumPy or CuPy arrays): the mutants compute on the
    host on every backend and hand the caller's backend its arrays back."""
    B = p.shape[0]
    return (np.broadcast_to(host(top_k).astype(np.int64), (B,)),
            np.broadcast_to(host(top_p).astype(np.float32), (B,)))


def _per_row(fn: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray], p: np.ndarray, k: np.ndarray,
             tp: np.ndarray) -> np.ndarray:
    """``fn(p, k, top_p)`` on the batch, once when the batch repeats one row with one setting."""
    if p.shape[0] > 1 and p.strides[0] == 0 and (k == k[0]).all() and (tp == tp[0]).all():
        return np.broadcast_to(fn(p[:1], k[:1], tp[:1]), p.shape)
    return fn(p, k, tp)


def _top_k_by_value(p: np.ndarray, k: np.ndarray, tp: np.ndarray) -> np.ndarray:
    V = p.shape[2]
    active = (k > 0) & (k < V)
    kk = np.clip(k, 1, V - 1)[:, None, None]
    kth = np.take_along_axis(-np.sort(-p, axis=2), kk - 1, axis=2)
    kept = np.where(p >= kth, p, np.float32(0))  # the bug: ties at the cut are kept
    kept = kept / kept.sum(axis=2, keepdims=True, dtype=np.float32)
    return np.where(active[:, None, None], kept, p)


def _top_p_by_value(p: np.ndarray, k: np.ndarray, tp: np.ndarray) -> np.ndarray:
    out = gs._top_k(np, p, k)
    srt = -np.sort(-out, axis=2)
    run = np.cumsum(srt, axis=2, dtype=np.float32)
    n = 1 + (run[:, :, :-1] < tp[:, None, None] * run[:, :, -1:]).sum(axis=2, keepdims=True)
    kept = np.where(out >= np.take_along_axis(srt, n - 1, axis=2), out, np.float32(0))  # the bug: ties at the cut are kept
    kept = kept / kept.sum(axis=2, keepdims=True, dtype=np.float32)
    return np.where((tp < 1)[:, None, None], kept, out)


def speculative_boundary_ties_accepted(base: ModuleType) -> Callable[..., Any]:
    def rejection_sample(target_probs, draft_probs, draft_tokens, accept_u, residual_u, top_k=0, top_p=1.0):
        p = host(target_probs).astype(np.float32, copy=False)
        k, tp = _settings(p, top_k, top_p)
        out = like(_per_row(_top_k_by_value, p, k, tp), target_probs)
        return base.rejection_sample(out, draft_probs, draft_tokens, accept_u, residual_u, 0, top_p)
    return rejection_sample


def speculative_top_p_boundary_ties(base: ModuleType) -> Callable[..., Any]:
    def rejection_sample(target_probs, draft_probs, draft_tokens, accept_u, residual_u, top_k=0, top_p=1.0):
        p = host(target_probs).astype(np.float32, copy=False)
        k, tp = _settings(p, top_k, top_p)
        out = like(_per_row(_top_p_by_value, p, k, tp), target_probs)
        return base.rejection_sample(out, draft_probs, draft_tokens, accept_u, residual_u, 0, 1.0)
    return rejection_sample


def _tile_draw(w: np.ndarray, r: np.ndarray, full: int) -> np.ndarray:
    """The bug: the normaliser and the CDF walk only the first ``full`` tokens (whole tiles)."""
    run = np.cumsum(w[:full], dtype=np.float64)
    hit = np.searchsorted(run, run[-1] * r, side="right")  # the first running sum above r·S
    return np.where(hit < full, hit, full - 1)


def speculative_tile_edge(base: ModuleType) -> Callable[..., Any]:
    def rejection_sample(target_probs, draft_probs, draft_tokens, accept_u, residual_u, top_k=0, top_p=1.0):
        tokens_in, n = base.rejection_sample(target_probs, draft_probs, draft_tokens, accept_u, residual_u, top_k, top_p)
        p = host(target_probs).astype(np.float32, copy=False)
        q = host(draft_probs).astype(np.float32, copy=False)
        B, K1, V = p.shape
        full = (V // TILE) * TILE
        if full in (0, V):
            return tokens_in, n
        k, tp = _settings(p, top_k, top_p)
        f = _per_row(lambda x, kk, tt: gs._filter(np, x, kk, tt), p, k, tp)  # the target's filters, done right
        r = host(residual_u).astype(np.float64)
        tokens = host(tokens_in).copy()
        stop = host(n) - 1
        shared = f.strides[0] == 0 and q.strides[0] == 0  # every row has the same target and draft
        for s in np.unique(stop):
            rows = np.flatnonzero(stop == s)
            for b in (rows[:1] if shared else rows):
                ps = f[b, s]
                w = ps if s == K1 - 1 else np.maximum(ps - q[b, s], np.float32(0))
                w = w if w.sum() > 0 else ps
                at = rows if shared else np.array([b])
                tokens[at, s] = _tile_draw(w, r[at, s], full)
        return like(tokens, tokens_in), n
    return rejection_sample


S = "speculative"
SPECULATIVE_MUTANTS: tuple[NearMutant, ...] = (
    NearMutant("speculative_boundary_ties_accepted", S, "rejection_sample", speculative_boundary_ties_accepted,
               "top-k by value alone: a token tied with the k-th keeps its probability (one more token at the cut)"),
    NearMutant("speculative_top_p_boundary_ties", S, "rejection_sample", speculative_top_p_boundary_ties,
               "top-p's kept set by value alone: tokens tied with the crossing token keep their probability"),
    NearMutant("speculative_tile_edge", S, "rejection_sample", speculative_tile_edge,
               "residual / bonus CDF over whole 1,024-wide tiles: the last V mod 1,024 tokens are never drawn there"),
)


def _as_mutant(m: NearMutant) -> Mutant:
    def build(base: ModuleType) -> ModuleType:
        return swapped(base, m.name, **{m.replaces: m.build(base)})
    return Mutant(m.name, m.size, frozenset({m.replaces}), replaced(build))


DOMAIN = Domain("speculative", "gpu_impl", lambda: list(PROPERTIES), tuple(_as_mutant(m) for m in SPECULATIVE_MUTANTS))
