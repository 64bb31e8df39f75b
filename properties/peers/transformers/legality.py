"""Is an HF warper's kept set a legal answer? A ``Legal``, judged by the peers' one judge
(``properties.peers.legality``), built from the oracle variant.

``torch.sort`` is not stable on CPU, so which of equal scores a top-p / typical warper drops is
unspecified: tokens are grouped into classes of equal pre-truncation scores (scores within 4 u of
each other after the dtype's rounding are one class, where any count is legal), and per class HF's
kept count must lie between the oracle's at the thresholds moved by δ towards "keep fewer" and
"keep more" (``shift``): the peers' one kept-set rule (``properties.peers.kept_set``). δ = 0 in
float64 (exact boundaries such as two equal logits at top_p = 0.5 are where "<=" versus "<" shows);
in float32 ``delta_for`` gives the cumulative-sum and exp rounding; a warper deciding on its
probabilities also ties the tokens whose float32 probability underflows to 0 (``on_probabilities``).
Where the counts equal the oracle's own, the probabilities are compared as sorted values (tied
tokens may trade places): ``PROB_TOL`` per dtype; at another legal count the bracket is the whole
verdict.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from oracle.candidates import TokenDataArray
from oracle.engines import transformers as o_hf
from properties.numerics import mass_allowance, unit_roundoff
from properties.peers.kept_set import class_counts, tie_classes
from properties.peers.legality import PeerOutput
from properties.peers.legality import Legal, check, unjudged
from properties.ties import underflowed

PROB_TOL = {"float64": 1e-12, "float32": 1e-6}


def shift(params: dict, thresholds: dict[str, int], keep_more: bool, delta: float) -> dict:
    """Thresholds moved by δ towards keeping fewer / more tokens (mass thresholds additively,
    probability thresholds by a factor e^±δ), clamped to each warper's legal range. top_p is
    clamped above 0: p = 0 turns MLX's top_p off (keeping every token), so a δ past p must leave it
    at its fewest, never off."""
    out = dict(params)
    for name, grows in thresholds.items():
        up = (grows > 0) == keep_more
        v = params[name]
        moved = (v + delta if up else v - delta) if name in ("p", "mass") else v * math.exp(delta if up else -delta)
        lo, hi = (1e-12, 1 - 1e-12) if name in ("mass", "eps") else (1e-12, 1.0) if name == "p" else (0.0, 1.0)
        out[name] = min(max(moved, lo), hi)
    return out


def delta_for(dtype: str, row: np.ndarray) -> float:
    if dtype == "float64":
        return 0.0  # exact: boundary equalities (e.g. two equal logits at p = 0.5) are semantics
    u, n = unit_roundoff(dtype), row.size  # the cumulative-sum allowance, plus exp's rounding of max|score|
    return mass_allowance(n, n, u) + float(np.abs(row[np.isfinite(row)]).max()) * u


def _mask(ids: np.ndarray, n: int) -> np.ndarray:
    out = np.zeros(n, dtype=bool)
    out[ids] = True
    return out


def answer(hf_out: np.ndarray) -> PeerOutput:
    """HF's masked dense row in the judge's answer form: the surviving (finite) tokens in input
    order, their scores and HF's probabilities (the softmax over the survivors); HF neither sorts
    the row nor selects."""
    ids = np.flatnonzero(np.isfinite(hf_out))
    p = o_hf.softmax(hf_out)[ids] if ids.size else np.zeros(0)
    return PeerOutput(ids, hf_out[ids], p, -1, False)


def legal_kept(dtype: str, key: np.ndarray, oracle: Callable[[dict], np.ndarray], thresholds: dict,
               params: dict, delta: float, on_probabilities: bool = False) -> Legal:
    """Every legal HF answer: per tie class of ``key`` (the pre-truncation scores) a kept count
    between the oracle's at the thresholds moved by δ; any kept scores, whose probabilities match
    the oracle's as sorted values where every class count is the oracle's own.
    ``on_probabilities``: the warper decides on its float32 probabilities (MinP's threshold and its
    ``min_tokens_to_keep`` restore, ``torch.topk(probs, k)``), so in float32 the tokens whose
    probability is an underflowed zero are one more tie (``properties.ties.underflowed``)."""
    exact = oracle(params)
    fewer, more = oracle(shift(params, thresholds, False, delta)), oracle(shift(params, thresholds, True, delta))
    cls, merged = tie_classes(key, dtype)
    if on_probabilities and dtype == "float32":
        zero = underflowed(key)
        if zero.sum() > 1:  # one class (its own id, past the others): which of them is kept is free
            cls = np.where(zero, cls.max(initial=-1) + 1, cls)
            merged = np.append(merged, False)
    kept = np.isfinite(exact)
    counts, ids = class_counts(kept, cls), np.flatnonzero(kept)
    p_exact = o_hf.softmax(exact)[ids]

    def p(peer_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if not np.array_equal(class_counts(_mask(peer_ids, key.size), cls), counts):
            return unjudged(peer_ids)  # another legal count: not the oracle's distribution to compare
        # equal counts: as many finite-score tokens as the oracle keeps (it keeps no -inf score);
        # any further ones HF kept have their p compared with 0
        ref = np.concatenate((np.zeros(peer_ids.size - ids.size), np.sort(p_exact)))
        return ref, np.full(peer_ids.size, PROB_TOL[dtype])

    return Legal((0, key.size), "input", frozenset({False}), must=np.isfinite(fewer), may=np.isfinite(more),
                 classes=cls, free=merged, logits=unjudged, p=p, p_unordered=True,
                 oracle=TokenDataArray(ids, exact[ids], p_exact, n_vocab=key.size))


@dataclass
class KeptVerdict:
    why: str | None
    """Why HF's answer is not legal, or None."""
    outcome: str
    """"boundary_bracketed" (counts other than the oracle's, inside the bracket), "identical_sets"
    or "tie_permuted" (the oracle's counts; the same tokens, or tied ones swapped); "rejected"."""
    prob_diff: float = 0.0
    """Largest difference of the sorted probabilities, where the counts are the oracle's."""


def check_kept(name: str, dtype: str, hf_out: np.ndarray, key: np.ndarray, oracle: Callable[[dict], np.ndarray],
               thresholds: dict, params: dict, delta: float, on_probabilities: bool = False) -> KeptVerdict:
    """``legal_kept``'s ``Legal`` judged by the peers' one judge, with the outcome for the report."""
    legal = legal_kept(dtype, key, oracle, thresholds, params, delta, on_probabilities)
    out = answer(hf_out)
    verdict = check(legal, TokenDataArray.from_logits(key), out)
    if not verdict.ok:
        return KeptVerdict(f"{name}[{dtype}]: {verdict.why}; HF kept {out.ids.tolist()}, oracle "
                           f"{legal.oracle.ids.tolist()}", "rejected")
    if np.array_equal(out.ids, legal.oracle.ids):
        return KeptVerdict(None, "identical_sets", verdict.p_ratio * PROB_TOL[dtype])
    kept, kept_oracle = (_mask(a, key.size) for a in (out.ids, legal.oracle.ids))
    if not np.array_equal(class_counts(kept, legal.classes), class_counts(kept_oracle, legal.classes)):
        return KeptVerdict(None, "boundary_bracketed")
    return KeptVerdict(None, "tie_permuted", verdict.p_ratio * PROB_TOL[dtype])
