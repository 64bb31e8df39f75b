"""Interchangeable tokens: the one definition of a tie, used by every legal set and bracket.

Two tokens are *interchangeable* for a stage when nothing the stage may legally compute tells
them apart, so an engine may put either one where the oracle puts the other:

- a stage that decides on logits (top_k, greedy, temp, top_n_sigma, every sort by logit): the
  tokens' logits are equal (``logit_classes``);
- a stage that decides on probabilities (top_p, min_p, typical, XTC, mirostat, mirostat v2, a
  no-op check of a probability filter): their float32 probabilities are equal
  (``prob_classes``): fl32 of the exact softmax, where every token whose probability lies below
  float32's normal range (p < 2^-126) counts as an underflowed zero. A subnormal has no relative
  precision and a flush-to-zero kernel makes it 0, so those tokens form one class with the
  tokens whose probability is 0. Equal logits give equal probabilities: the probability classes
  are unions of logit classes, never a split of one.

Tie classes are data: an int64 array, one class id per token, numbered 0, 1, ... in descending
value order (class 0 holds the maximum); -1 marks a token that is no candidate (-inf logit). A
near-tie (values within a rounding window) is not a tie: the samplers' windows and the peers'
``rounding_classes`` handle those.

What a tie frees, and what it does not:

- kept sets: within a class only the count kept is judged, never which tokens (``counts``);
- selections: a token tied with a legal one is legal (``close``), except where the reference
  engine has a deterministic rule: greedy and temp <= 0 on a row keep the *first* maximum (a
  linear scan in index order: llama.cpp, torch.argmax), and that stays exact;
- orders (top-n logprobs): any order of equal values (torch.topk defines none).

``canonical`` relabels an answer so that within each class the lowest ids hold its places, and
``relabel`` maps ids by a permutation inside the classes: a verdict must not change under
either (``properties/meta/test_meta_ties.py``).
"""
from __future__ import annotations

import numpy as np

from properties.numerics import F32_TINY, unit_roundoff

NO_CLASS = -1


def tie_classes(values: np.ndarray) -> np.ndarray:
    """Class id per token: equal values share a class, numbered in descending value order;
    -inf and NaN get ``NO_CLASS``."""
    v = np.asarray(values, dtype=np.float64)
    out = np.full(v.size, NO_CLASS, dtype=np.int64)
    live = np.flatnonzero(np.isfinite(v) | (v == np.inf))
    if live.size:
        uniq, inv = np.unique(-v[live], return_inverse=True)  # ascending -v: descending v
        out[live] = inv.reshape(-1)
    return out


def logit_classes(row: np.ndarray) -> np.ndarray:
    """Tie classes of a stage deciding on logits: equal logits."""
    return tie_classes(row)


def float32_probs(row: np.ndarray) -> np.ndarray:
    """The float32 probability a stage deciding on probabilities compares, as one correctly
    rounded value per token: fl32 of the exact softmax, 0 below float32's normal range (subnormal
    and flushed results are one value: no relative precision is left there) and at -inf."""
    x = np.asarray(row, dtype=np.float64)
    fin = np.isfinite(x)
    if not fin.any():
        return np.zeros(x.size)
    e = np.where(fin, np.exp(np.where(fin, x - x[fin].max(), 0.0)), 0.0)
    p = (e / e.sum()).astype(np.float32).astype(np.float64)
    return np.where(p < F32_TINY, 0.0, p)


def prob_classes(row: np.ndarray) -> np.ndarray:
    """Tie classes of a stage deciding on probabilities: equal float32 probabilities
    (``float32_probs``), underflowed zeros included; -inf logits get ``NO_CLASS``."""
    x = np.asarray(row, dtype=np.float64)
    cls = tie_classes(float32_probs(x))
    cls[~np.isfinite(x)] = NO_CLASS
    return cls


def interchangeable(a: int, b: int, classes: np.ndarray) -> bool:
    """Whether tokens ``a`` and ``b`` are tied (the same class; a non-candidate ties with nothing)."""
    return bool(a == b or (classes[a] != NO_CLASS and classes[a] == classes[b]))


def counts(mask: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """How many tokens of each class ``mask`` holds (tokens of no class are not counted)."""
    inside = classes >= 0
    return np.bincount(classes[inside], weights=np.asarray(mask, dtype=bool)[inside],
                       minlength=int(classes.max(initial=-1)) + 1).astype(np.int64)


def close(mask: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """``mask`` plus every token tied with a token in it: a selection's legal set, modulo ties."""
    mask = np.asarray(mask, dtype=bool)
    hit = np.zeros(int(classes.max(initial=-1)) + 1, dtype=bool)
    hit[classes[mask & (classes >= 0)]] = True
    return mask | ((classes >= 0) & hit[np.maximum(classes, 0)])


def canonical(mask: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """The kept set with, per class, the same count held by the class's lowest ids: two kept sets
    are equal modulo ties exactly when their canonical forms are equal. Tokens of no class keep
    their own membership."""
    mask = np.asarray(mask, dtype=bool)
    out = mask & (classes < 0)
    want = counts(mask, classes)
    live = np.flatnonzero(classes >= 0)
    by_class = live[np.argsort(classes[live], kind="stable")]  # ascending id within each class
    c = classes[by_class]
    start = np.searchsorted(c, c, side="left")
    rank = np.arange(by_class.size) - start  # position of each token among its class's ids
    out[by_class[rank < want[c]]] = True
    return out


def canonical_ids(ids: np.ndarray, classes: np.ndarray) -> np.ndarray:
    """A sequence of token ids (a ranking, a top-n list, selected tokens) with the ids of each
    class handed out in ascending order to that class's places: equal modulo ties exactly when
    the canonical sequences are equal."""
    ids = np.asarray(ids).copy()
    flat = ids.reshape(-1)
    cls = classes[flat]
    for c in np.unique(cls[cls >= 0]):
        at = np.flatnonzero(cls == c)
        flat[at] = np.sort(flat[at])
    return ids


def relabel(classes: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A permutation of token ids that maps every class onto itself (a token of no class stays):
    ``perm[i]`` is the id that takes token i's place."""
    perm = np.arange(classes.size)
    for c in np.unique(classes[classes >= 0]):
        members = np.flatnonzero(classes == c)
        if members.size > 1:
            perm[members] = rng.permutation(members)
    return perm


def rounding_classes(key: np.ndarray, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Classes of keys equal after the dtype's rounding, for a peer that sorts its own rounded
    keys: class id per token, counted up from 0 in ascending key order; equal keys are one class,
    and so are keys within 4 u of each other (a tie the float64 keys do not have). Also, per class,
    whether it was merged that way: any count is legal there. -inf tokens get ``NO_CLASS``."""
    out = np.full(key.size, NO_CLASS)
    fin = np.flatnonzero(np.isfinite(key))
    order = fin[np.argsort(key[fin], kind="stable")]
    cls, merged, prev = -1, [], None
    for i in order:
        v = key[i]
        if prev is None or v - prev > 4 * unit_roundoff(dtype) * max(abs(v), abs(prev)):
            cls += 1
            merged.append(False)
        elif v != prev:
            merged[cls] = True
        out[i], prev = cls, v
    return out, np.asarray(merged, dtype=bool)


def underflowed(row: np.ndarray) -> np.ndarray:
    """Finite tokens whose float32 probability is an underflowed zero (``float32_probs``): a stage
    deciding on probabilities cannot tell them from masked ones."""
    x = np.asarray(row, dtype=np.float64)
    return np.isfinite(x) & (float32_probs(x) == 0)
