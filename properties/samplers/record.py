"""One record per sampler: how to build the oracle, call the impl, draw parameters, and judge.

Tests are generated from these records (parametrised by ``record.name``), so adding a sampler
means: an oracle factory, an impl function, and one record here. No test body is written twice.
"""
from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, Literal

import numpy as np
from hypothesis import strategies as st

from oracle.candidates import TokenDataArray
from oracle.samplers.base import Sampler

Kind = Literal["filter", "transform", "select"]
Params = dict[str, Any]
_RUNS_KEPT = 12  # a 9-variant selection judged twice fits; ~6 MB per 262,144-token run
_RUNS: OrderedDict[tuple, tuple["SamplerRecord", TokenDataArray]] = OrderedDict()  # least recent first


def row_digest(a: np.ndarray) -> tuple:
    """The memo's name for an array's contents. SHA-1 over the buffer (no copy): 1.6 ms for a
    262,144-token float64 row, blake2b over ``tobytes()`` 4.4 ms; accidental collisions only
    matter here, and a digest is computed once per row and judge (``row_key``)."""
    return a.dtype.str, a.shape, hashlib.sha1(np.ascontiguousarray(a)).digest()


def _params_key(params: Params) -> tuple:
    return tuple((k, row_digest(np.asarray(v)) if isinstance(v, np.ndarray) else repr(v)) for k, v in sorted(params.items()))


@dataclass(frozen=True)
class SamplerRecord:
    name: str
    kind: Kind
    oracle: Callable[[Params], Sampler]
    """One row's scalar parameters -> a ready oracle sampler (history already accepted)."""
    params: Callable[[int, int], st.SearchStrategy[Params]]
    """(batch, vocab) -> per-row parameter arrays."""
    impl: Callable[[Any, np.ndarray, Params], Any] | None = None
    """(Impl, logits [B,V], params) -> the impl's batched result; None = oracle-only."""
    impl_name: str = ""
    """The gpu_impl function this record exercises (for "not covered" reports)."""
    variants: Callable[[Params, np.ndarray], list[Params]] = lambda p, row: [p]
    """Parameters at the edges of the fp32 uncertainty: the bracket is built from their oracle runs."""
    key: Callable[[np.ndarray, Params], tuple[np.ndarray, float]] | None = None
    """(row, params) -> (the value the filter ranks by, near-tie width) for tie expansion."""
    bracket_on: Literal["kept", "removed"] = "kept"
    transform_bound_u: Callable[[np.ndarray, Params], np.ndarray] | None = None
    """For transforms: allowed error per element in units of u·|exact output|."""
    legal: Callable[[np.ndarray, Params], np.ndarray] | None = None
    """For selections: mask of tokens the impl may legally return (default: the oracle's union
    over ``variants``)."""
    judge_state: Callable[["SamplerRecord", np.ndarray, Params, int, tuple], tuple[str | None, Any]] | None = None
    """For a stateful selector: (record, row, params, the token it chose, its further outputs) ->
    (why the updated state is wrong or None, an ErrorReport): every output is judged."""
    masked_are_candidates: bool = True
    """False where llama.cpp's result depends on how many -inf entries the array holds (temp_ext's
    ln(size)): a masked row cannot say whether -inf was a candidate, so the reference for a
    fixed-shape impl is the oracle on the array without its -inf entries."""
    noop: tuple[Params, ...] = ()
    """Scalar parameter sets for which the sampler must be an exact no-op."""
    monotone: tuple[tuple[str, int, float], ...] = ()
    """(param, +1 if the survivor set grows with it / -1 if it shrinks, smallest value at which the
    sampler is active: k <= 0 and n <= 0 switch it off, which means "keep all")."""
    min_keep: bool = False
    families: tuple[str, ...] | None = None
    dtypes: tuple[str, ...] = ("float32", "float16", "bfloat16")
    allowance: str = ""
    """The stated boundary allowance, in words (shown in the report)."""
    tags: frozenset[str] = field(default_factory=frozenset)

    def __repr__(self) -> str:  # pytest ids and hypothesis output
        return self.name

    @property
    def has_impl(self) -> bool:
        return self.impl is not None

    def candidates(self, row64: np.ndarray, truncated: bool = False) -> TokenDataArray:
        """The array the oracle starts from; ``truncated`` drops -inf entries first (a truncating
        chain's view). Copies of one such array share its descending sort, so the variants of a
        bracket sort a 262,144-token row once, not once per variant."""
        cur = TokenDataArray.from_logits(row64)
        if truncated or not self.masked_are_candidates:
            cur.keep(np.flatnonzero(np.isfinite(cur.logits)))
        return cur

    def run_oracle(self, row64: np.ndarray, params: Params, truncated: bool = False,
                   start: TokenDataArray | None = None, row_key: tuple | None = None) -> TokenDataArray:
        """The oracle on ``row64`` (a fresh copy: callers may change it); ``start``:
        ``candidates(row64, truncated)``, if already built; ``row_key``: ``row_digest(row64)``, if
        already computed (a judge running nine variants digests its row once). Memoised, being a
        pure function of its inputs: a mass window and the bracket, or the legal tokens and the
        state judge, ask for the same parameters, and each run may sort a 262,144-token row."""
        key = (id(self), truncated, row_key or row_digest(row64), _params_key(params))
        if key in _RUNS:
            _RUNS.move_to_end(key)
        else:
            cur = start.copy() if start is not None else self.candidates(row64, truncated)
            self.oracle({**params, "n_vocab": row64.size}).apply(cur)
            _RUNS[key] = (self, cur)  # holding the record keeps its id from being reused
            while len(_RUNS) > _RUNS_KEPT:
                _RUNS.popitem(last=False)
        return _RUNS[key][1].copy()

    def oracle_kept(self, row64: np.ndarray, params: Params, truncated: bool = False,
                    start: TokenDataArray | None = None, row_key: tuple | None = None) -> np.ndarray:
        """Survivor mask over the vocab (finite survivors only: -inf is 'not a candidate')."""
        cur = self.run_oracle(row64, params, truncated, start, row_key)
        kept = np.zeros(row64.size, dtype=bool)
        kept[cur.ids[np.isfinite(cur.logits)]] = True
        return kept

    def legal_tokens(self, row64: np.ndarray, params: Params) -> np.ndarray:
        if self.legal is not None:
            return self.legal(row64, params)
        legal = np.zeros(row64.size, dtype=bool)
        start, rk = self.candidates(row64), row_digest(row64)
        for v in self.variants(params, row64):
            legal[self.run_oracle(row64, v, start=start, row_key=rk).selected_token] = True
        return legal

    def must_may(self, row64: np.ndarray, params: Params, truncated: bool = False) -> tuple[np.ndarray, np.ndarray]:
        from properties.samplers.brackets import bracket

        start, rk = self.candidates(row64, truncated), row_digest(row64)
        sets = [self.oracle_kept(row64, v, truncated, start, rk) for v in self.variants(params, row64)]
        key, eps = self.key(row64, params) if self.key else (None, 0.0)
        if self.bracket_on == "removed":
            finite = np.isfinite(row64)
            must_r, may_r = bracket([finite & ~s for s in sets], key, eps)
            return finite & ~may_r, finite & ~must_r
        return bracket(sets, key, eps)
