"""Is a peer's kept set a legal answer? One rule for every peer: per class of interchangeable
tokens, the number kept lies between the numbers kept by two answers that bracket it.

A truncating sampler answers with a kept set. Each peer's builder derives the two bracketing
sets (llama.cpp: ``must`` and ``may`` from its float32 model, ``llama_cpp/legal_filters.py``;
transformers: the oracle variant at thresholds moved towards keeping fewer and more tokens,
``transformers/legality.py``) and a partition of the tokens into classes, as fields of one
``Legal``, which the peers' one judge (``properties/peers/legality.py``) checks. Tokens a peer may
legally exchange (equal scores that an unstable sort orders either way) form one class, and within
a class only how many are kept is judged, never which (the one definition of a tie:
``properties.ties``). With every token its own class (``singletons``) the rule is must ⊆ kept ⊆ may.
"""
from __future__ import annotations

import numpy as np

# the one definition of a tie, under the names the peers' builders use: ``tie_classes`` (a peer's
# rounded keys: equal, or within 4 u, with a flag per merged class) and ``class_counts``
from properties.ties import counts as class_counts, rounding_classes as tie_classes  # noqa: F401


def singletons(n: int) -> np.ndarray:
    """Every token its own class: the kept set itself is judged, token by token."""
    return np.arange(n)


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
