"""One record per sampler: how to build the oracle, call the impl, draw parameters, and judge,
and every role the sampler plays elsewhere, each as a typed facet (``None``: it takes no part).

Tests and every per-sampler table are generated from these records (parametrised by
``record.name``), so adding a sampler means: an oracle factory, an impl function, and one record
in ``records.py``. No test body is written twice, and no table elsewhere is keyed by a name.
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
from properties.samplers.strategies import FAMILIES

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
class ChainRole:
    """A member of the masked-vs-truncated chains (``samplers/chains.py``)."""
    exact: Callable[[int], st.SearchStrategy[Params]] | None = None
    """vocab -> one row's scalar parameters that keep every transform exact in fp32 (None: the
    record's own ``params`` at batch 1, which are exact already)."""
    default: bool = False
    """In the default chain (llama.cpp's edskypmxt with its default no-ops left out)."""
    position: int = 0
    """Its place in common_sampler's chain (logit_bias first, then the edskypmxt order, temperature
    last): chains built from the catalogue list their members in this order."""


@dataclass(frozen=True)
class OrderRole:
    """A member of the order matrix (``samplers/order.py``): its own pair parameters, named apart
    from every other member's, and how they become the sampler's constructor parameters."""
    params: Callable[[bool], dict[str, st.SearchStrategy]]
    """exact_temp -> {pair parameter: strategy}; exact_temp asks for powers-of-two temperatures."""
    build: Callable[[dict, int], Params]
    """(pair parameters, vocab) -> constructor parameters for ``SamplerRecord.build`` (a
    ``history`` entry is accepted after construction)."""


@dataclass(frozen=True)
class LlamaRole:
    """The llama.cpp peer facet: how llama.cpp's own sampler is built and judged."""
    name: str
    """llama.cpp's name for it (``llama_sampler_i::name``), which the oracle sampler's ``.name`` mirrors."""
    params: Callable[[int], st.SearchStrategy[Params]]
    """vocab -> constructor parameters at float32 width (oracle and llama.cpp see the same value)."""
    peer: Callable[[Params, int], Any]
    """(constructor parameters, vocab) -> llama.cpp's sampler (``properties.peers.llama_cpp.adapter``)."""
    legal: Callable
    """The legal-answer builder (pre-apply oracle, input, oracle output, drift) -> ``Legal``."""
    families: tuple[str, ...] = field(default_factory=lambda: tuple(FAMILIES))
    """Logit families drawn for it."""
    history: bool = False
    """Accepts a drawn token history before the single-step apply."""
    stream: str = ""
    """"" stateless; "own": accepts the token it selected; "fed": accepts a fixed token stream."""
    self_state: bool = False
    """Its state follows its own selection: a stream stops at the first legal divergence."""
    stream_params: Params | None = None
    """One representative parameter set for the long seeded streams (None: not streamed)."""
    sorts: bool = False
    """llama.cpp sorts the array first (its bucket sort; top_k <= 128 uses std::partial_sort)."""
    backend: bool = False
    """llama.cpp has a ggml-graph version (``backend_apply``), checked against the real library."""
    backend_chain: str = ""
    """Its place in the generated backend chains: "prefix" (graph ops), "suffix" (CPU), or ""."""
    backend_params: Callable[[int], st.SearchStrategy[Params]] | None = None
    """vocab -> fp32-exact constructor parameters for the backend chains (every legal shape)."""
    call: str = ""
    """The reproducer scripts' C-API call, a format string over the constructor parameters."""
    letter: str = ""
    """Its letter in common_sampler's ``--sampling-seq`` (``oracle.chain``)."""
    settings: Callable[[Any], Params] | None = None
    """``oracle.chain.SamplingParams`` -> its constructor parameters in common_sampler's chain."""


@dataclass(frozen=True)
class SamplerRecord:
    name: str
    kind: Kind
    params: Callable[[int, int], st.SearchStrategy[Params]]
    """(batch, vocab) -> per-row parameter arrays."""
    build: Callable[[Params, int], Sampler] | None = None
    """The one oracle factory: (llama.cpp's constructor parameters, n_vocab) -> oracle sampler."""
    oracle: Callable[[Params], Sampler] | None = None
    """One row's scalar parameters -> a ready oracle sampler (history already accepted); default
    ``build`` on the same parameters, where the impl takes the constructor's parameters."""
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
    ties: Callable[[np.ndarray], np.ndarray] | None = None
    """row -> tie class per token (``properties.ties``: ``logit_classes`` for a stage deciding on
    logits, ``prob_classes`` for one deciding on probabilities): a kept set is judged by its count
    per class, a selection modulo its class. None: no tie freedom (greedy's first maximum, dist's
    CDF in token order, a transform)."""
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
    corner: Callable[[int], Params] | None = None
    """vocab -> one row's scalar parameters for the pinned generic corners (``corners.py``)."""
    cut: Callable[[], Any] | None = None
    """-> the float32 corner ``Case`` placing its cut just outside the judge's window."""
    boundary: Callable[[int, int], Params] | None = None
    """(k equal finite tokens, m in [1, k]) -> the parameters that put the boundary exactly on a
    token (``boundaries.py``)."""
    chain: ChainRole | None = None
    order: OrderRole | None = None
    llama: LlamaRole | None = None

    def __post_init__(self) -> None:
        if self.oracle is None:
            if self.build is None:
                raise ValueError(f"sampler record {self.name!r} has neither an oracle nor a build factory")
            build = self.build
            object.__setattr__(self, "oracle", lambda p: build(p, p.get("n_vocab", 0)))

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
