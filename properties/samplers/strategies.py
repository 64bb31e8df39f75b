"""Input strategies: hypothesis draws structure, NumPy fills the arrays.

A case is (family, vocab size, batch, dtype, seed): hypothesis shrinks those few integers and
names, and ``make_logits`` builds a 262,144-wide row in milliseconds. Shrinking therefore moves
towards simple families, small batches and seed 0, and towards the small vocabularies except
where a failure also occurs at 32,000 tokens (see ``vocab_sizes``: the minimal vocabulary choice
is the first large size, so that every property visits one).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Callable

import ml_dtypes
import numpy as np
from hypothesis import strategies as st

from properties.numerics import ulp
from properties.profiles import large_vocab_max_batch, large_vocab_weight

if TYPE_CHECKING:
    from properties.samplers.record import SamplerRecord

DTYPES = {"float32": np.dtype(np.float32), "float16": np.dtype(np.float16),
          "bfloat16": np.dtype(ml_dtypes.bfloat16)}
# block edges: one below, at and one above the warp, tile and block widths engines reduce in
BLOCK_EDGES = (31, 32, 33, 63, 64, 65, 127, 128, 129, 255, 256, 257, 1023, 1024, 1025, 4095, 4096, 4097)
SMALL_VOCABS = tuple(sorted({1, 2, 3, 4, 5, 8, 17, 100, 1000, *BLOCK_EDGES}))
LARGE_VOCABS = (32000, 151936, 262144)


def _peaked(rng: np.random.Generator, v: int) -> np.ndarray:
    x = rng.normal(0.0, 2.0, v)
    x[rng.integers(v)] += rng.uniform(5, 20)
    return x


def _flat(rng: np.random.Generator, v: int) -> np.ndarray:
    return rng.uniform(-0.5, 0.5, v)


@lru_cache(maxsize=4)
def _log_ranks(v: int) -> np.ndarray:
    out = np.log(np.arange(1, v + 1))
    out.flags.writeable = False
    return out


def _zipf(rng: np.random.Generator, v: int) -> np.ndarray:
    s = rng.uniform(0.6, 1.6)
    return rng.permutation(-s * _log_ranks(v) + 10)


def _plateaus(rng: np.random.Generator, v: int) -> np.ndarray:
    levels = np.sort(rng.normal(0, 3, rng.integers(1, 5)))
    return levels[rng.integers(0, levels.size, v)]


def _near_ties(rng: np.random.Generator, v: int, dtype: str = "float32") -> np.ndarray:
    """A few values one unit in the last place of ``dtype`` apart."""
    base = rng.normal(0, 4)
    return base + ulp(base, dtype) * rng.integers(0, 4, v)


def _neg_inf(rng: np.random.Generator, v: int) -> np.ndarray:
    x = rng.normal(0, 3, v)
    x[rng.random(v) < rng.uniform(0.1, 0.99)] = -np.inf
    x[rng.integers(v)] = rng.normal(0, 3)  # at least one finite token
    return x


def _huge(rng: np.random.Generator, v: int) -> np.ndarray:
    return rng.normal(0, 1, v) * 10.0 ** rng.uniform(3, 30)


def _past_fp16(rng: np.random.Generator, v: int) -> np.ndarray:
    return rng.uniform(6.6e4, 3e5, v) * rng.choice([-1, 1], v)


def _one_finite(rng: np.random.Generator, v: int) -> np.ndarray:
    x = np.full(v, -np.inf)
    x[rng.integers(v)] = rng.normal(0, 5)
    return x


FAMILIES: dict[str, Callable[[np.random.Generator, int], np.ndarray]] = {
    "peaked": _peaked, "flat": _flat, "zipf": _zipf, "plateaus": _plateaus, "near_ties": _near_ties,
    "neg_inf": _neg_inf, "huge": _huge, "past_fp16": _past_fp16, "one_finite": _one_finite,
}
# values a 16-bit input format cannot hold turn into inf: those families are fp32-only
FP32_ONLY = {"huge", "past_fp16"}


def make_logits(family: str, vocab: int, seed: int, dtype: str = "float32") -> np.ndarray:
    """One row of ``family`` at ``vocab`` tokens, rounded to ``dtype`` (deterministic in seed)."""
    rng = np.random.default_rng(seed)
    if family == "near_ties":  # ties must be one ulp apart in the dtype the engine receives
        row = _near_ties(rng, vocab, dtype)
    else:
        row = FAMILIES[family](rng, vocab)
    return row.astype(np.float32).astype(DTYPES[dtype])


@dataclass
class Case:
    """A batch of logits plus per-row parameters; its repr is the replay recipe, not the data."""

    family: str
    vocab: int
    dtype: str
    seeds: tuple[int, ...]
    params: dict[str, np.ndarray] = field(default_factory=dict)
    logits: np.ndarray = field(default=None, repr=False)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.logits is None:
            self.logits = np.stack([make_logits(self.family, self.vocab, s, self.dtype) for s in self.seeds])

    @property
    def batch(self) -> int:
        return len(self.seeds)

    def row64(self, b: int) -> np.ndarray:
        """Row b exactly as the implementation sees it, widened to float64 for the oracle."""
        return self.logits[b].astype(np.float64)

    def row_params(self, b: int) -> dict:
        return {k: ((v[b].item() if v.ndim == 1 else v[b]) if isinstance(v, np.ndarray) else v)
                for k, v in self.params.items()}

    def __repr__(self) -> str:
        shown = {k: (np.asarray(v).tolist()) for k, v in self.params.items()}
        return (f"Case(family={self.family!r}, vocab={self.vocab}, dtype={self.dtype!r}, "
                f"seeds={self.seeds}, params={shown})")


def vocab_sizes(max_vocab: int = 262144, min_vocab: int = 1) -> st.SearchStrategy[int]:
    return _vocab_sizes(max_vocab, min_vocab, large_vocab_weight())


@lru_cache(maxsize=None)
def _vocab_sizes(max_vocab: int, min_vocab: int, w: float) -> st.SearchStrategy[int]:
    # built once per shape: hypothesis validates every new strategy object, which cost ~10 % of
    # the heaviest properties when these were rebuilt at every draw
    small = [v for v in SMALL_VOCABS if min_vocab <= v <= max_vocab]
    large = [v for v in LARGE_VOCABS if min_vocab <= v <= max_vocab]
    if not large or not small:
        return st.sampled_from(small or large)
    # "large?" as one of ten choices, ``w`` of them large. The first (minimal) choice is large:
    # hypothesis tries the minimal example first, so every property visits a large row in every
    # profile (with the large choices all last, 12 of 148 ci properties drew none in 40 examples).
    # The price: a failure that occurs at every size shrinks to 32,000 tokens, not to 1.
    # (st.integers(0, 999) < 100, used before, came out 30 % large at ci and 41 % nightly, as
    # hypothesis' integers lean to small values.)
    tenths = max(1, round(w * 10))
    small_s, large_s = st.sampled_from(small), st.sampled_from(large)
    choices = [True] + [False] * (10 - tenths) + [True] * (tenths - 1)
    return st.sampled_from(choices).flatmap(lambda big: large_s if big else small_s)


@lru_cache(maxsize=None)
def _batches(max_batch: int) -> st.SearchStrategy[int]:
    # batches of 5-9 too: a kernel's per-row blocks, and a parameter broadcast from the wrong row
    return (st.integers(1, max_batch) if max_batch < 5 else
            st.one_of(st.integers(1, 3), st.integers(5, max_batch)))


@lru_cache(maxsize=None)
def _seeds(batch: int) -> st.SearchStrategy[list[int]]:
    return st.lists(st.integers(0, 2**16), min_size=batch, max_size=batch)


@lru_cache(maxsize=4096)
def _params(param_strategy: Callable[[int, int], st.SearchStrategy[dict]], batch: int, vocab: int):
    return param_strategy(batch, vocab)


@st.composite
def cases(draw: st.DrawFn, param_strategy: Callable[[int, int], st.SearchStrategy[dict]] | None = None,
          families: tuple[str, ...] = tuple(FAMILIES), dtypes: tuple[str, ...] = ("float32",),
          max_batch: int = 9, max_vocab: int = 262144, min_vocab: int = 1) -> Case:
    """A ``Case``; ``param_strategy(batch, vocab)`` draws the per-row parameters."""
    dtype = draw(st.sampled_from(dtypes), label="dtype")
    allowed = [f for f in families if dtype == "float32" or f not in FP32_ONLY]
    family = draw(st.sampled_from(allowed), label="family")
    vocab = draw(vocab_sizes(max_vocab, min_vocab), label="vocab")
    if vocab >= LARGE_VOCABS[0]:  # per-row paths are exercised at every small size; see profiles
        max_batch = min(max_batch, large_vocab_max_batch())
    batch = draw(_batches(max_batch), label="batch")
    seeds = tuple(draw(_seeds(batch), label="seeds"))
    params = draw(_params(param_strategy, batch, vocab), label="params") if param_strategy else {}
    return Case(family, vocab, dtype, seeds, params)


def record_cases(record: "SamplerRecord", dtype: str, **kw) -> st.SearchStrategy[Case]:
    """Cases in the record's families (all by default) with the record's parameters."""
    return cases(record.params, families=record.families or tuple(FAMILIES), dtypes=(dtype,), **kw)


def per_row(strategy: st.SearchStrategy, batch: int, dtype=np.float64) -> st.SearchStrategy[np.ndarray]:
    """One parameter value per row, as the [B] array gpu_impl takes."""
    return st.lists(strategy, min_size=batch, max_size=batch).map(lambda xs: np.asarray(xs, dtype=dtype))


def floats32(lo: float, hi: float, **kw) -> st.SearchStrategy[float]:
    """float32 values in [lo, hi], with the bounds moved inwards to representable floats."""
    lo32, hi32 = np.float32(lo), np.float32(hi)
    if lo32 < lo:
        lo32 = np.nextafter(lo32, np.float32(np.inf))
    if hi32 > hi:
        hi32 = np.nextafter(hi32, np.float32(-np.inf))
    return st.floats(float(lo32), float(hi32), width=32, allow_nan=False, **kw)


# ---- llama.cpp constructor parameters (the peer facet of a record) ----------------------------

def f32(lo: float, hi: float, *special: float) -> st.SearchStrategy[float]:
    """float32 values in [lo, hi] (bounds rounded inwards), plus the listed special values: the
    oracle and llama.cpp then see the same value."""
    drawn = floats32(lo, hi)
    specials = [float(np.float32(x)) for x in special]
    return st.one_of(st.sampled_from(specials), drawn) if special else drawn


def peer_seed() -> st.SearchStrategy[int]:
    return st.integers(0, 2**32 - 2)  # 0xFFFFFFFF means "random" in llama.cpp


def token_history(vocab: int) -> st.SearchStrategy[list[int]]:
    # a small alphabet, so that penalties count repeats and DRY finds repeated suffixes
    small = st.integers(0, min(vocab, 6) - 1)
    return st.lists(st.one_of(small, small, st.integers(0, vocab - 1)), max_size=40)


def dry_breakers(vocab: int) -> st.SearchStrategy[list[list[int]]]:
    return st.lists(st.lists(st.integers(0, min(vocab, 6) - 1), min_size=1, max_size=3), max_size=3)


NO_UNDERFLOW = ("peaked", "flat", "zipf", "plateaus", "near_ties")  # typical: no p underflows to 0
# logits >= 3.3e8 break llama.cpp's bucket sort (finding "bucket-sort-int-overflow"): the
# samplers that sort draw every family but "huge"; top_k keeps it (k <= 128 sorts correctly)
SORTABLE = tuple(f for f in FAMILIES if f != "huge")
