"""Is a peer's answer legal? The peers' one judge.

For llama.cpp's samplers, ``llama_cpp/legal.py`` turns the oracle's float64 answer plus the float32 error model into a ``Legal``
description (which sizes, which order, which logits and p within which bounds, which selection);
``check`` compares the peer's actual ``PeerOutput`` (the candidate array after one ``apply``)
against it and says what is wrong.

Order rules: "ranked" outputs must match the oracle's ranking position by position on a key
(logit, typicality score) up to the key's tolerance, so tied (equal keys: ``properties.ties``) or
near-tied tokens are interchangeable and nothing else is; "suffix" is the same for XTC, which drops the head of the
ranking; "input" outputs keep the input order and, per class of interchangeable tokens, the count
kept lies between ``must``'s and ``may``'s (``properties.peers.kept_set``; every token its own
class unless ``classes`` says otherwise, so the kept set lies in [must, may]).

This is the peers' one judge: HF transformers' warpers are judged by a ``Legal`` too
(``properties.peers.transformers.legality`` builds it: tie classes, the bracket of the oracle
variant at shifted thresholds, probabilities compared as sorted values where the kept counts are
the oracle's).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, NamedTuple

import numpy as np

from oracle.candidates import TokenDataArray, identity_ids
from properties.peers.kept_set import outside_bracket, singletons

P_FLOOR = 1e-6  # the absolute p agreement asked for; the float model may allow more (see legal.py)


class PeerOutput(NamedTuple):
    """The array after ``apply``: entries [0, size) as llama.cpp left them (data pointer included)."""

    ids: np.ndarray
    logits: np.ndarray
    p: np.ndarray
    selected: int
    sorted: bool


class FindingDomain(Exception):
    """The input lies where a recorded llama.cpp finding applies (``args[0]`` = finding id)."""


class Unsupported(Exception):
    """The judge makes no claim for this input (the reason says why); tests must avoid it."""


Model = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]
"""peer ids (in peer order) -> (reference values, absolute tolerance) for those entries."""


@dataclass
class Legal:
    sizes: tuple[int, int]
    order: str  # "ranked" | "suffix" | "input" | "same" (exactly the input entries, in order)
    sorted_flags: frozenset
    ranking: np.ndarray | None = None  # token ids in the oracle's order (ranked / suffix)
    key: np.ndarray | None = None  # dense over token ids
    key_tol: np.ndarray | None = None  # dense over token ids; pairs may differ by tol[a] + tol[b]
    must: np.ndarray | None = None  # dense bool over token ids ("input" order): the two answers
    may: np.ndarray | None = None  # that bracket the kept count of every class
    classes: np.ndarray | None = None  # dense class id per token (-1: not judged); None: singletons
    free: np.ndarray | None = None  # bool per class: any kept count is legal there
    logits: Model | None = None  # None: logits untouched (exactly the input's)
    maskable: np.ndarray | None = None  # dense bool: entries that may legally be -inf instead
    p: Model | None = None  # None: p untouched (stale input p)
    p_unordered: bool = False  # p compared as sorted values: a peer may give tied tokens' p to either
    select: Callable[[PeerOutput], str | None] | None = None  # None: selected must stay as input
    oracle: TokenDataArray | None = None
    alt: dict | None = None  # sorted flag -> Legal, where the flag picks a different path (min_p)
    notes: dict = field(default_factory=dict)


@dataclass
class Verdict:
    ok: bool
    why: str
    identical: bool
    p_ratio: float = 0.0
    logit_ratio: float = 0.0
    ambiguous: bool = False  # the legal set admits a size or survivor set other than the oracle's
    selectable: np.ndarray | None = None  # token ids a legal float path may select (selectors)


def dense(ids: np.ndarray, values: np.ndarray, n: int, fill: float = np.nan) -> np.ndarray:
    dtype = np.float64 if np.asarray(values).dtype != bool else bool
    if ids is identity_ids(ids.size) and ids.size == n:  # a whole raw row: already dense (a copy)
        return np.array(values, dtype=dtype)
    out = np.full(n, fill, dtype=dtype)
    out[ids] = values
    return out


def lookup(ref: np.ndarray, tol: np.ndarray) -> Model:
    """A model that reads dense reference arrays (indexed by token id; a whole raw row as is)."""
    def model(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        if ids.size == ref.size and ids is identity_ids(ids.size):
            return ref, tol
        return ref[ids], tol[ids]
    return model


def unjudged(ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A model that allows every finite value: the entries are judged elsewhere (HF's kept scores,
    through their probabilities)."""
    return np.zeros(ids.size), np.full(ids.size, np.inf)


def _ratio(diff: np.ndarray, tol: np.ndarray) -> tuple[float, int]:
    """Largest diff / tol (0 where diff is 0, inf where it is NaN or tol is 0) and its index."""
    if not diff.size:
        return 0.0, 0
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.divide(diff, tol, out=np.zeros_like(diff), where=diff != 0)
    i = int(np.argmax(r))  # the first NaN if there is one
    return (np.inf if np.isnan(r[i]) else float(r[i])), i


def check(legal: Legal, cur_in: TokenDataArray, out: PeerOutput) -> Verdict:
    o = legal.oracle
    if legal.alt and out.sorted in legal.alt:
        legal = legal.alt[out.sorted]
    why = _check(legal, cur_in, out)
    lo, hi = legal.sizes
    ambiguous = (lo != hi or (legal.must is not None and legal.may is not None and bool((legal.may & ~legal.must).any()))
                 or (legal.maskable is not None and bool(legal.maskable.any())) or _cut_within_tolerance(legal, o))
    return Verdict(why is None, why or "", _same_up_to_ties(cur_in, out, o),
                   legal.notes.get("p_ratio", 0.0), legal.notes.get("logit_ratio", 0.0),
                   ambiguous, legal.notes.get("selectable"))


def _cut_within_tolerance(legal: Legal, o: TokenDataArray | None) -> bool:
    """A ranked cut where a kept token and a dropped one tie, or their keys are within tolerance
    (typical's float scores): either could have been kept."""
    if legal.order != "ranked" or legal.ranking is None or legal.key is None or o is None:
        return False
    kept, dropped = legal.ranking[:o.size], legal.ranking[o.size:]
    if not kept.size or not dropped.size:
        return False
    tol = legal.key_tol if legal.key_tol is not None else np.zeros_like(legal.key)
    return bool((legal.key[kept] - tol[kept]).min() <= (legal.key[dropped] + tol[dropped]).max())


def _same_up_to_ties(cur_in: TokenDataArray, out: PeerOutput, o: TokenDataArray | None) -> bool:
    """Same size, and position by position the same token or one with an equal input logit (an
    unstable sort's legal reordering); for a selection, the selected tokens tie as well."""
    if o is None or out.ids.size != o.size:
        return False
    if np.array_equal(out.ids, o.ids):
        same = True
    else:
        logit = dense(cur_in.ids, cur_in.logits, int(max(cur_in.ids.max(), out.ids.max(initial=0))) + 1)
        same = bool(np.array_equal(logit[out.ids], logit[o.ids]))
    if same:  # a masking sampler (top_n_sigma) keeps the size: the same tokens must be -inf
        n = int(max(o.ids.max(initial=0), out.ids.max(initial=0))) + 1
        same = bool(np.array_equal(dense(out.ids, np.isneginf(out.logits), n, False),
                                   dense(o.ids, np.isneginf(o.logits), n, False)))
    if same and 0 <= o.selected < o.size:
        if not 0 <= out.selected < out.ids.size:
            return False
        a, b = int(out.ids[out.selected]), int(o.ids[o.selected])
        same = bool(a == b or cur_in.logits[cur_in.ids == a][0] == cur_in.logits[cur_in.ids == b][0])
    return same


def _check(legal: Legal, cur_in: TokenDataArray, out: PeerOutput) -> str | None:
    n_in, ids = cur_in.size, out.ids
    if out.sorted not in legal.sorted_flags:
        return f"sorted={out.sorted}, legal {sorted(legal.sorted_flags)}"
    lo, hi = legal.sizes
    if not lo <= ids.size <= hi:
        return f"size {ids.size}, legal [{lo}, {hi}]"
    raw = cur_in.ids is identity_ids(n_in)  # a whole raw row: every token id is its input position
    same = legal.order == "same"
    if same:  # exactly the input entries (distinct by construction), in order: nothing to look up
        if not np.array_equal(ids, cur_in.ids):
            return "entries moved, were dropped or added (this sampler keeps the array as it is)"
    elif raw:
        if ids.size and (ids.min() < 0 or ids.max() >= n_in or np.bincount(ids, minlength=n_in).max() > 1):
            return "ids are not distinct input ids"
        pos_in = None
    else:
        vocab = int(max(cur_in.ids.max(), ids.max(initial=0))) + 1
        pos_in = dense(cur_in.ids, np.arange(n_in), vocab, fill=-1).astype(np.int64)
        seen = np.zeros(vocab, dtype=bool)
        seen[ids] = True
        if int(seen.sum()) != ids.size or (pos_in[ids] < 0).any():
            return "ids are not distinct input ids"
    if legal.order == "input":
        if (np.diff(ids if pos_in is None else pos_in[ids]) <= 0).any():
            return "input order not preserved"
        kept = np.zeros(legal.must.size, dtype=bool)
        kept[ids] = True
        # the peers' one kept-set rule (llama.cpp's builders: singletons, must ⊆ may)
        cls = singletons(kept.size) if legal.classes is None else legal.classes
        bad = outside_bracket(kept, legal.must, legal.may, cls, legal.free)
        if bad and legal.classes is not None:
            return f"kept counts per class (must, kept, may) outside the bracket: {bad}"
        if bad:
            missing = [t for t, (lo, got, hi) in bad.items() if got < min(lo, hi)]
            extra = [t for t, (lo, got, hi) in bad.items() if got > max(lo, hi)]
            return f"survivors outside [must, may]: missing {missing[:6]}, extra {extra[:6]}"
    elif not same:
        r = legal.ranking
        ref = r[:ids.size] if legal.order == "ranked" else r[r.size - ids.size:]
        moved = np.flatnonzero(ids != ref)  # positions holding another token than the oracle's
        a, b = ids[moved], ref[moved]
        with np.errstate(invalid="ignore"):  # -inf keys: equal infinities are a tie
            gap = np.abs(legal.key[a] - legal.key[b])
        gap = np.where(legal.key[a] == legal.key[b], 0.0, gap)
        bad = np.flatnonzero(gap > legal.key_tol[a] + legal.key_tol[b])
        if bad.size:
            i = int(moved[bad[0]])
            return (f"position {i}: token {ids[i]} (key {legal.key[ids[i]]:.9g}) where the oracle ranks token "
                    f"{ref[i]} (key {legal.key[ref[i]]:.9g}), tolerance {legal.key_tol[ids[i]] + legal.key_tol[ref[i]]:.3g}")
    if same:
        ids = cur_in.ids  # equal to out.ids; the input's array lets a whole-row model skip its lookup
        logit_in, p_in = cur_in.logits, cur_in.p
    elif raw:
        logit_in, p_in = cur_in.logits[ids], cur_in.p[ids]
    else:
        logit_in, p_in = dense(cur_in.ids, cur_in.logits, vocab)[ids], dense(cur_in.ids, cur_in.p, vocab)[ids]
    if legal.logits is None:
        if not np.array_equal(out.logits.astype(np.float64), logit_in):
            return "logits changed by a sampler that must leave them untouched"
    else:
        ref, tol = legal.logits(ids)
        with np.errstate(over="ignore"):  # the float32 result llama.cpp stores; tol covers the rest
            ref = ref.astype(np.float32).astype(np.float64)
        got = out.logits.astype(np.float64)
        fin = np.isfinite(got) & np.isfinite(ref)
        if not fin.all():
            maskable = legal.maskable[ids] if legal.maskable is not None else np.zeros(ids.size, dtype=bool)
            inf_bad = (np.isinf(got) | np.isinf(ref)) & (got != ref) & ~(maskable & np.isneginf(got))
            if inf_bad.any():
                i = int(np.flatnonzero(inf_bad)[0])
                return f"token {ids[i]}: logit {got[i]} where the oracle has {ref[i]}"
        with np.errstate(invalid="ignore"):
            diff = np.abs(got - ref)
            r, i = _ratio(diff if fin.all() else np.where(fin, diff, 0.0), tol)
        legal.notes["logit_ratio"] = r
        if r > 1:
            return f"token {ids[i]}: logit {got[i]!r} vs oracle {ref[i]!r}, allowed ±{tol[i]:.3g}"
    if legal.p is None:
        if not (np.array_equal(out.p, p_in) or np.array_equal(out.p.astype(np.float64), p_in, equal_nan=True)):
            return "p changed by a sampler that must leave p untouched"
    else:
        ref, tol = legal.p(ids)
        got = out.p.astype(np.float64)
        if legal.p_unordered:  # the k-th largest against the k-th largest
            by_ref = np.argsort(ref, kind="stable")
            got, ref, tol = np.sort(got), ref[by_ref], tol[by_ref]
        r, i = _ratio(np.abs(got - ref), tol)
        legal.notes["p_ratio"] = r
        if r > 1:
            if legal.p_unordered:
                return f"sorted p {got[i]!r} vs oracle {ref[i]!r}, allowed ±{tol[i]:.3g}"
            return f"token {ids[i]}: p {out.p[i]!r} vs oracle {ref[i]!r}, allowed ±{tol[i]:.3g}"
    if legal.select is None:
        if out.selected != cur_in.selected:
            return f"selected changed to {out.selected} by a sampler that does not select"
        return None
    return legal.select(out)
