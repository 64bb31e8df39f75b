"""The candidate array, mirroring ``llama_token_data_array``.

llama.cpp samplers mutate one array of ``{id, logit, p}`` in place: they truncate it (``size``),
reorder it (``sorted``), compute ``p`` or leave it stale, and the final one sets ``selected``
(an index into the array, not a token id). The oracle keeps exactly that state so that
"which sampler leaves p stale" and "which one reorders" are part of the specification.

Ties: llama.cpp sorts with unstable ``std::sort``/``std::partial_sort``, so the order of equal
logits is unspecified there. The oracle breaks ties by current position (a stable sort); any
comparison against llama.cpp must treat tied entries as interchangeable.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np


def validate_logits_row(logits: np.ndarray) -> np.ndarray:
    """Return ``logits`` as a float64 1-D array or raise ValueError naming the defect.

    Decisions shared with ``gpu_impl`` (the bad-input property checks they agree): empty
    vocabularies, NaN and +inf logits are rejected; -inf marks an excluded token.
    """
    arr = np.asarray(logits)
    if arr.ndim != 1:
        raise ValueError(f"logits must be 1-D, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError("logits is empty: a vocabulary needs at least one token")
    if not (np.issubdtype(arr.dtype, np.floating) or arr.dtype.kind == "V" or arr.dtype.name == "bfloat16"):
        raise ValueError(f"logits must be floating point, got dtype {arr.dtype}")
    out = arr.astype(np.float64)
    top = out.max()  # one pass: NaN propagates through max, and +inf is the max if present
    if np.isnan(top):
        raise ValueError(f"logits contain NaN at token ids {np.flatnonzero(np.isnan(out))[:8].tolist()}")
    if top == np.inf:
        raise ValueError(f"logits contain +inf at token ids {np.flatnonzero(out == np.inf)[:8].tolist()}")
    return out


def descending_order(values: np.ndarray) -> np.ndarray:
    """Positions sorted by value descending, ties by position: what a stable sort returns.

    NumPy's stable argsort of float64 is ~3x slower than its introsort, which dominates a wide
    nucleus at 262,144 tokens. So sort unstably, then restore position order inside each run of
    equal values (the only place the two sorts can differ): key = (run, position), one integer sort.
    """
    order = np.argsort(-values)
    v = values[order]
    tie = v[1:] == v[:-1]
    if not tie.any():
        return order
    in_run = np.zeros(v.size, dtype=bool)
    in_run[1:] |= tie
    in_run[:-1] |= tie
    idx = np.flatnonzero(in_run)
    starts = ~np.concatenate(([False], tie))[idx]  # a run member not tied to its predecessor
    run = np.cumsum(starts, dtype=np.int64)  # runs are contiguous, so keys keep each run's slots
    order[idx] = np.sort(run * v.size + order[idx]) % v.size
    return order


def ascending_order(values: np.ndarray) -> np.ndarray:
    """Positions sorted by value ascending, ties by position: ``np.argsort(values, kind="stable")``
    (as ``descending_order``, 3x faster at 262,144 float64 tokens). NaN sorts last, as there."""
    values = np.asarray(values)
    if np.isnan(values).any():  # NaN is never "equal", so the tie repair cannot order those
        return np.argsort(values, kind="stable")
    return descending_order(-values)


@lru_cache(maxsize=8)
def identity_ids(n: int) -> np.ndarray:
    """0..n-1, shared and read-only: samplers replace ``ids`` (fancy indexing), never write it."""
    ids = np.arange(n, dtype=np.int64)
    ids.flags.writeable = False
    return ids


_identity_ids = identity_ids


@dataclass
class TokenDataArray:
    """``llama_token_data_array`` in float64: parallel arrays plus the ``sorted``/``selected`` flags.

    ``descending()`` (the full stable descending order of the current logits) is computed at most
    once per logits array and shared with copies until either side assigns new ``ids`` or
    ``logits``: a judge that sorts the input and the oracle that sorts its copy sort once.
    """

    ids: np.ndarray
    logits: np.ndarray
    p: np.ndarray
    sorted: bool = False
    selected: int = -1
    n_vocab: int = field(default=0)
    _order: list = field(default_factory=list, repr=False, compare=False)  # [] or [order], shared by copies

    def __setattr__(self, name: str, value) -> None:
        if name in ("ids", "logits"):
            object.__setattr__(self, "_order", [])
        object.__setattr__(self, name, value)

    def descending(self) -> np.ndarray:
        """``descending_order(self.logits)`` (read-only), computed once for these logits."""
        if not self._order:
            order = descending_order(self.logits)
            order.flags.writeable = False
            self._order.append(order)
        return self._order[0]

    @classmethod
    def from_logits(cls, logits: np.ndarray) -> "TokenDataArray":
        """Build the array llama.cpp builds from raw logits: ids 0..n-1, p = 0, unsorted."""
        row = validate_logits_row(logits)
        if row is logits:  # astype may return its input; the array must own its logits
            row = row.copy()
        n = row.size
        return cls(ids=_identity_ids(n), logits=row, p=np.zeros(n), n_vocab=n)

    @property
    def size(self) -> int:
        return int(self.ids.size)

    def copy(self) -> "TokenDataArray":
        ids = self.ids if not self.ids.flags.writeable else self.ids.copy()  # read-only ids are shared
        out = TokenDataArray(ids, self.logits.copy(), self.p.copy(), self.sorted, self.selected, self.n_vocab)
        object.__setattr__(out, "_order", self._order)  # same logits: the same order, computed once
        return out

    def keep(self, index: np.ndarray | slice) -> None:
        """Restrict to ``index`` (positions), in the order given."""
        self.ids, self.logits, self.p = self.ids[index], self.logits[index], self.p[index]

    def top_set(self, m: int) -> np.ndarray:
        """Positions of the m largest logits, ties by position, in no particular order: exactly
        the set of the first m entries of a full stable sort, in O(n)."""
        n = self.size
        if m >= n:
            return np.arange(n)
        if self._order:
            return self._order[0][:m].copy()
        # Every entry >= the m-th largest of a strided sample is a candidate; if there are at
        # least m of them the top m are among them (exact), and only they are partitioned.
        pool = None
        sample = self.logits[:: max(n // (64 * m), 1)]
        if sample.size > m:
            guess = np.partition(sample, sample.size - m)[sample.size - m]
            above_guess = np.flatnonzero(self.logits >= guess)
            if above_guess.size >= m:
                pool = above_guess
        if pool is None:
            pool = np.arange(n)
        values = self.logits[pool]
        kth = np.partition(values, values.size - m)[values.size - m]
        above = pool[values > kth]
        ties = pool[values == kth][: m - above.size]
        return np.concatenate([above, ties])

    def top_positions(self, m: int, chosen: np.ndarray | None = None) -> np.ndarray:
        """Positions of the m largest logits in descending order, ties by position: exactly the
        first m entries of a full stable sort, in O(n + m log m). ``chosen``: ``top_set(m)``, if known."""
        if m >= self.size or self._order:
            return self.descending()[:m].copy()
        chosen = self.top_set(m) if chosen is None else chosen.copy()
        chosen.sort()  # ascending positions, so descending_order's ties come out by position
        return chosen[descending_order(self.logits[chosen])]

    def sort_descending(self) -> None:
        """Sort by logit, descending; ties keep their current relative order."""
        if not self.sorted:
            self.keep(self.descending())
        self.sorted = True

    def softmax(self, do_sort: bool) -> None:
        """``llama_sampler_softmax_impl``: normalise p over the current entries; logits untouched."""
        if self.size == 0:
            raise ValueError("softmax of an empty candidate array")
        if do_sort:
            self.sort_descending()
        m = self.logits.max()
        if not np.isfinite(m):
            raise ValueError("softmax of a candidate array whose logits are all -inf")
        e = np.exp(self.logits - m)
        self.p = e / e.sum()

    @property
    def selected_token(self) -> int:
        if not 0 <= self.selected < self.size:
            raise ValueError(f"no token selected (selected={self.selected}, size={self.size})")
        return int(self.ids[self.selected])

    def dense_logits(self, n_vocab: int | None = None) -> np.ndarray:
        """Scatter surviving logits back to vocab order, -inf for dropped tokens (the masked view)."""
        n = n_vocab or self.n_vocab or (int(self.ids.max()) + 1)
        out = np.full(n, -np.inf)
        out[self.ids] = self.logits
        return out

    def distribution(self, n_vocab: int | None = None) -> np.ndarray:
        """The distribution a ``dist`` after this point samples from, over the whole vocab."""
        dense = self.dense_logits(n_vocab)
        m = dense.max()
        if not np.isfinite(m):
            raise ValueError("no finite logit survives: the distribution is undefined")
        e = np.exp(dense - m)
        return e / e.sum()
