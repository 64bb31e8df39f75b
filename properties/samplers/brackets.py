"""May/must brackets: a filter's survivor set is judged against the oracle at the extreme legal
parameters (``SamplerRecord.variants``), not against one exact answer. Where fp32 rounding or a
tie lets a token go either way, it is in ``may`` but not in ``must``; the implementation must keep
every ``must`` token and nothing outside ``may``. With the stage's tie classes
(``properties.ties``; ``SamplerRecord.ties``) the rule is taken per class: which tied tokens are
kept is free, how many lies between must's and may's counts (the peers' one kept-set rule)."""
from __future__ import annotations

import numpy as np

from properties.peers.kept_set import outside_bracket


def bracket(sets: list[np.ndarray], key: np.ndarray | None, eps: float = 0.0) -> tuple[np.ndarray, np.ndarray]:
    """(must, may) survivor masks from oracle runs at the extreme legal parameters.

    ``must`` = kept by every run, minus tokens within ``eps`` of some token outside it (a tie or
    near-tie may resolve either way); ``may`` = kept by some run, plus tokens within ``eps`` of the
    weakest token inside it. ``key`` is the value the filter ranks by (None: no tie expansion).
    """
    must = np.logical_and.reduce(sets)
    may = np.logical_or.reduce(sets)
    if key is None:
        return must, may
    finite = np.isfinite(key)
    outside = finite & ~must
    if outside.any() and must.any():
        must = must & (key > key[outside].max() + eps)
    if may.any():
        may = may | (finite & (key >= key[may].min() - eps))
    return must, may


def describe_set_violation(kept: np.ndarray, must: np.ndarray, may: np.ndarray,
                           classes: np.ndarray | None = None) -> str | None:
    """None if must ⊆ kept ⊆ may, else which tokens break it. With ``classes`` (the stage's tie
    classes, ``properties.ties``) the rule is taken modulo ties: per class, the kept count lies
    between must's and may's (the peers' one kept-set rule), so any tied subset of the right size
    is legal."""
    if classes is not None:
        return _class_violation(kept, must, may, classes)
    missing = np.flatnonzero(must & ~kept)
    extra = np.flatnonzero(kept & ~may)
    if missing.size == 0 and extra.size == 0:
        return None
    parts = []
    if missing.size:
        parts.append(f"dropped {missing.size} token(s) the oracle must keep, e.g. ids {missing[:6].tolist()}")
    if extra.size:
        parts.append(f"kept {extra.size} token(s) the oracle may not keep, e.g. ids {extra[:6].tolist()}")
    return "; ".join(parts) + f" (must={int(must.sum())}, may={int(may.sum())}, kept={int(kept.sum())})"


def _class_violation(kept: np.ndarray, must: np.ndarray, may: np.ndarray, classes: np.ndarray) -> str | None:
    kept = np.asarray(kept, dtype=bool)
    bad = outside_bracket(kept, must, may, classes)
    if not bad:
        return None
    parts = []
    for c, (lo, got, hi) in list(bad.items())[:3]:
        members = np.flatnonzero(classes == c)
        parts.append(f"{got} kept of the {members.size} tied token(s) {members[:6].tolist()} "
                     f"(kept {np.flatnonzero(kept & (classes == c))[:6].tolist()}), legal {min(lo, hi)}..{max(lo, hi)}")
    return "; ".join(parts) + f" (must={int(must.sum())}, may={int(may.sum())}, kept={int(kept.sum())}; " \
                              f"which tied tokens are kept is free, how many is not)"
