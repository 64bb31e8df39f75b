"""Is a peer's kept set a legal answer? One rule for every peer: per class of interchangeable
tokens, the number kept lies between the numbers kept by two answers that bracket it.

A truncating sampler answers with a kept set. Each peer's builder derives the two bracketing
sets (llama.cpp: ``must`` and ``may`` from its float32 model, ``llama_cpp/legal_filters.py``;
transformers: the oracle variant at thresholds moved towards keeping fewer and more tokens,
``transformers/legality.py``) and a partition of the tokens into classes, as fields of one
``Legal``, which the peers' one judge (``properties/peers/legality.py``) checks. Tokens a peer may
legally exchange (equal scores that an unstable sort orders either way) form one class, and within
a class only how many are kept is judged, never which. With every token its own class
(``singletons``) the rule is must ⊆ kept ⊆ may.
"""
from __future__ import annotations

import numpy as np

from properties.numerics import unit_roundoff


def singletons(n: int) -> np.ndarray:
    """Every token its own class: the kept set itself is judged, token by token."""
    return np.arange(n)


def tie_classes(key: np.ndarray, dtype: str) -> tuple[np.ndarray, np.ndarray]:
    """Class id per token, counted up from 0 in ascending key order: equal keys are one class, and
    so are keys within 4 u of each other (equal after the dtype's rounding, where the peer may see a
    tie the float64 keys do not have). Also, per class, whether it was merged that way: any count
    is legal there. -inf tokens get -1 (no class)."""
    out = np.full(key.size, -1)
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


def class_counts(kept: np.ndarray, cls: np.ndarray) -> np.ndarray:
    """Tokens kept per class id (tokens of class -1 are not counted)."""
    inside = cls >= 0
    return np.bincount(cls[inside], weights=np.asarray(kept, dtype=bool)[inside],
                       minlength=int(cls.max(initial=-1)) + 1).astype(np.int64)


def outside_bracket(kept: np.ndarray, fewer: np.ndarray, more: np.ndarray, cls: np.ndarray,
                    free: np.ndarray | None = None) -> dict[int, tuple[int, int, int]]:
    """The classes whose kept count is not between ``fewer``'s and ``more``'s (either may be the
    larger), each with (fewer's count, the kept count, more's count); classes marked ``free`` are
    never outside. All masks are dense over the same tokens as ``cls``."""
    c, c_few, c_more = (class_counts(a, cls) for a in (kept, fewer, more))
    bad = (c < np.minimum(c_few, c_more)) | (c > np.maximum(c_few, c_more))
    if free is not None:
        bad &= ~free
    return {int(v): (int(c_few[v]), int(c[v]), int(c_more[v])) for v in np.flatnonzero(bad)}
