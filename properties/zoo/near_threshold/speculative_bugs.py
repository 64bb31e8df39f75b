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

from properties.speculative import PROPERTIES
from properties.zoo.near_threshold import NearMutant
from properties.zoo.runner import Domain, Mutant, replaced, swapped

TILE = 1024


def speculative_boundary_ties_accepted(base: ModuleType) -> Callable[..., Any]:
    def rejection_sample(target_probs, draft_probs, draft_tokens, accept_u, residual_u, top_k=0, top_p=1.0):
        p = np.asarray(target_probs, dtype=np.float32)
        B, _, V = p.shape
        k = np.broadcast_to(np.asarray(top_k, dtype=np.int64), (B,))
        out = p.copy()
        for b in np.flatnonzero((k > 0) & (k < V)):
            kth = -np.partition(-p[b], k[b] - 1, axis=1)[:, k[b] - 1:k[b]]
            kept = np.where(p[b] >= kth, p[b], np.float32(0))  # the bug: ties at the cut are kept
            out[b] = kept / kept.sum(axis=1, keepdims=True, dtype=np.float32)
        return base.rejection_sample(out, draft_probs, draft_tokens, accept_u, residual_u, 0, top_p)
    return rejection_sample


def speculative_top_p_boundary_ties(base: ModuleType) -> Callable[..., Any]:
    def rejection_sample(target_probs, draft_probs, draft_tokens, accept_u, residual_u, top_k=0, top_p=1.0):
        p = np.asarray(target_probs, dtype=np.float32)
        B, K1, V = p.shape
        k = np.broadcast_to(np.asarray(top_k, dtype=np.int64), (B,))
        tp = np.broadcast_to(np.asarray(top_p, dtype=np.float32), (B,))
        out = p.copy()
        for b in np.flatnonzero((k > 0) & (k < V)):
            out[b] = np.stack([_kept(row, int(k[b])) for row in p[b]])
        srt = -np.sort(-out, axis=2)
        run = np.cumsum(srt, axis=2, dtype=np.float32)
        n = 1 + (run[:, :, :-1] < tp[:, None, None] * run[:, :, -1:]).sum(axis=2, keepdims=True)
        kept = np.where(out >= np.take_along_axis(srt, n - 1, axis=2), out, np.float32(0))  # the bug: ties at the cut are kept
        kept /= kept.sum(axis=2, keepdims=True, dtype=np.float32)
        out = np.where((tp < 1)[:, None, None], kept, out)
        return base.rejection_sample(out, draft_probs, draft_tokens, accept_u, residual_u, 0, 1.0)
    return rejection_sample


def speculative_tile_edge(base: ModuleType) -> Callable[..., Any]:
    def rejection_sample(target_probs, draft_probs, draft_tokens, accept_u, residual_u, top_k=0, top_p=1.0):
        tokens, n = base.rejection_sample(target_probs, draft_probs, draft_tokens, accept_u, residual_u, top_k, top_p)
        p = np.asarray(target_probs, dtype=np.float32)
        q = np.asarray(draft_probs, dtype=np.float32)
        B, K1, V = p.shape
        full = (V // TILE) * TILE
        if full in (0, V):
            return tokens, n
        k = np.broadcast_to(np.asarray(top_k, dtype=np.int64), (B,))
        tp = np.broadcast_to(np.asarray(top_p, dtype=np.float32), (B,))
        tokens = tokens.copy()
        for b in range(B):
            s = int(n[b]) - 1
            ps = p[b, s] if not (0 < k[b] < V) else _kept(p[b, s], int(k[b]))
            ps = ps if tp[b] >= 1 else _kept(ps, _top_p_count(ps, float(tp[b])))
            w = ps if s == K1 - 1 else np.maximum(ps - q[b, s], np.float32(0))
            if w.sum() == 0:
                w = ps
            w = w[:full]  # the bug: the last partial tile is not in the normaliser or the scan
            run = np.cumsum(w, dtype=np.float64)
            hit = np.flatnonzero((run > run[-1] * float(np.asarray(residual_u)[b, s])) & (w > 0))
            tokens[b, s] = hit[0] if hit.size else full - 1
        return tokens, n
    return rejection_sample


def _top_p_count(row: np.ndarray, top_p: float) -> int:
    run = np.cumsum(-np.sort(-row), dtype=np.float32)
    return 1 + int((run[:-1] < np.float32(top_p) * run[-1]).sum())


def _kept(row: np.ndarray, k: int) -> np.ndarray:
    order = np.lexsort((np.arange(row.size), -row))
    out = np.zeros_like(row)
    out[order[:k]] = row[order[:k]]
    return out / out.sum(dtype=np.float32)


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
