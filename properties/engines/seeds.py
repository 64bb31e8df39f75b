"""Per-request seeds (``engines.vllm_sample_seeded``): a seeded row's token depends on its logits,
its seed and the step only, whatever the other rows' seeds are (seeded, unseeded, equal to its
own), the batch size or the row's position. -1 is an unseeded row (the batch generator).

A ``SeedCase`` is drawn structure (family, vocab, per-row logits seeds, per-row request seeds, the
step, a batch seed, a permutation); ``violation`` runs the engine on the drawn batch and on other
compositions of it, and names the first row whose token moved:

- "as drawn": the batch itself;
- "alone": the row in a batch of 1 with its seed;
- "others reseeded": every other row's seed changed (unseeded rows seeded, seeded ones moved);
- "others unseeded": every other row -1;
- "permuted": the drawn batch with its rows (and their seeds) permuted.

Every composition uses its own batch seed, so an engine that lets the batch generator reach a
seeded row gives it different uniforms in each. Within one batch, rows with equal seeds and equal
logits must give equal tokens. Tokens are compared exactly: a seeded row sees the same uniforms
and the same logits in every composition, so nothing legitimately moves it."""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Callable

import numpy as np
from hypothesis import strategies as st

from properties.profiles import large_vocab_max_batch
from properties.samplers.strategies import FAMILIES, LARGE_VOCABS, make_logits, vocab_sizes

UNSEEDED = -1
FN = "vllm_sample_seeded"
SEED_MAX = 2**63 - 1
STEPS = (0, 1, 5)


@dataclass(frozen=True)
class SeedCase:
    family: str
    vocab: int
    rows: tuple[int, ...]
    """make_logits seed of each row: equal entries are equal logits."""
    seeds: tuple[int, ...]
    """request seed of each row, -1 = unseeded."""
    step: int
    batch_seed: int
    perm: tuple[int, ...]

    @property
    def batch(self) -> int:
        return len(self.seeds)

    @cached_property
    def logits(self) -> np.ndarray:
        return np.stack([make_logits(self.family, self.vocab, r) for r in self.rows])


@dataclass(frozen=True)
class Composition:
    name: str
    rows: tuple[int, ...]
    """indices into the drawn batch, in this batch's order."""
    seeds: tuple[int, ...]
    batch_seed: int

    def describe(self) -> str:
        return f"{self.name!r} (rows {list(self.rows)}, seeds {list(self.seeds)}, batch_seed {self.batch_seed})"


@st.composite
def seed_cases(draw: st.DrawFn, max_batch: int = 8) -> SeedCase:
    """Batches of 2-``max_batch`` rows (2 at large vocabularies outside the nightly profile, as
    ``strategies.cases``); each row's seed distinct, equal to an earlier seeded row's, or -1; each
    row's logits fresh or a copy of an earlier row's."""
    family = draw(st.sampled_from(tuple(FAMILIES)), label="family")
    vocab = draw(vocab_sizes(min_vocab=2), label="vocab")
    if vocab >= LARGE_VOCABS[0]:
        max_batch = max(2, min(max_batch, large_vocab_max_batch()))
    batch = draw(st.integers(2, max_batch), label="batch")
    rows: list[int] = []
    seeds: list[int] = []
    for b in range(batch):
        copy = draw(st.none() | st.integers(0, b - 1), label=f"logits of row {b}") if b else None
        rows.append(rows[copy] if copy is not None else draw(st.integers(0, 2**16), label=f"logits seed {b}"))
        kind = draw(st.sampled_from(("distinct", "equal", "unseeded")), label=f"seed kind {b}")
        seeded = [s for s in seeds if s != UNSEEDED]
        if kind == "unseeded":
            seeds.append(UNSEEDED)
        elif kind == "equal" and seeded:
            seeds.append(draw(st.sampled_from(seeded), label=f"seed of row {b}"))
        else:
            s = draw(st.integers(0, SEED_MAX), label=f"seed of row {b}")
            while s in seeds:
                s = (s + 1) % (SEED_MAX + 1)
            seeds.append(s)
    step = draw(st.sampled_from(STEPS), label="step")
    batch_seed = draw(st.integers(0, 2**32), label="batch seed")
    perm = tuple(draw(st.permutations(range(batch)), label="permutation"))
    return SeedCase(family, vocab, tuple(rows), tuple(seeds), step, batch_seed, perm)


def _moved(seed: int, j: int) -> int:
    """Another seed for row j: a seeded row's moved, an unseeded row's a fixed one."""
    return (seed + 1 + (j + 1) * 2**40) % (SEED_MAX + 1) if seed != UNSEEDED else 2**41 + j


def compositions(case: SeedCase) -> tuple[Composition, list[tuple[int, list[Composition]]]]:
    """The drawn batch, and for each seeded row the other compositions it must agree in."""
    n = case.batch
    drawn = Composition("as drawn", tuple(range(n)), case.seeds, case.batch_seed)
    permuted = Composition("permuted", case.perm, tuple(case.seeds[i] for i in case.perm), case.batch_seed + 1)
    per_row = []
    for r, s in enumerate(case.seeds):
        if s == UNSEEDED:
            continue
        reseeded = tuple(s if j == r else _moved(case.seeds[j], j) for j in range(n))
        unseeded = tuple(s if j == r else UNSEEDED for j in range(n))
        per_row.append((r, [Composition("alone", (r,), (s,), case.batch_seed + 2),
                            Composition("others reseeded", tuple(range(n)), reseeded, case.batch_seed + 3),
                            Composition("others unseeded", tuple(range(n)), unseeded, case.batch_seed + 4),
                            permuted]))
    return drawn, per_row


def run(sub: Callable[..., Any], case: SeedCase, comp: Composition) -> dict[int, int]:
    """Token of each drawn row in ``comp``: {index in the drawn batch: token}."""
    x = case.logits[list(comp.rows)]
    ids = np.asarray(sub(FN, x, np.asarray(comp.seeds, dtype=np.int64), case.step, comp.batch_seed))
    if ids.shape != (len(comp.rows),):
        raise AssertionError(f"{FN} returned shape {ids.shape} for {len(comp.rows)} rows")
    return {r: int(t) for r, t in zip(comp.rows, ids)}


def _equal_rows(case: SeedCase, comp: Composition, tokens: dict[int, int]) -> str | None:
    for a in range(len(comp.rows)):
        for b in range(a + 1, len(comp.rows)):
            i, j = comp.rows[a], comp.rows[b]
            s = comp.seeds[a]
            if s != UNSEEDED and s == comp.seeds[b] and case.rows[i] == case.rows[j] and tokens[i] != tokens[j]:
                return (f"rows {i} and {j} have equal logits (make_logits({case.family!r}, {case.vocab}, "
                        f"{case.rows[i]})) and equal seed {s} but give tokens {tokens[i]} and {tokens[j]} "
                        f"in composition {comp.describe()}")
    return None


def violation(sub: Callable[..., Any], case: SeedCase) -> str | None:
    """Why ``sub`` (an ``Impl`` of the engines module) breaks per-request seeds on ``case``, or None."""
    drawn, per_row = compositions(case)
    seen = {drawn.name: run(sub, case, drawn)}
    why = _equal_rows(case, drawn, seen[drawn.name])
    if why:
        return why
    for r, others in per_row:
        for comp in others:
            key = comp.name if comp.name == "permuted" else f"{comp.name}:{r}"
            if key not in seen:
                seen[key] = run(sub, case, comp)
                why = _equal_rows(case, comp, seen[key])
                if why:
                    return why
            a, b = seen[drawn.name][r], seen[key][r]
            if a != b:
                return (f"row {r} (seed {case.seeds[r]}, logits make_logits({case.family!r}, {case.vocab}, "
                        f"{case.rows[r]}), step {case.step}) gives token {a} in composition {drawn.describe()} "
                        f"but token {b} in composition {comp.describe()}")
    return None


# --- the law over seeds, and a stream that advances -----------------------------------------

LAW_CHUNK = 1_000_000
"""Logits elements per call when many seeded rows are drawn at once."""
LAW_ROWS = (("zipf", 64, 61, 0), ("plateaus", 64, 62, 3), ("flat", 200, 63, 1))
"""(family, vocab, logits seed, step): the rows the law over seeds is judged on."""
STREAM_VOCAB, STREAM_SEEDS, STREAM_STEPS = 1000, 200, 5
STREAM_ALPHA = 1e-10
"""P(a correct engine fails the stream property on one row): the binomial tail below."""


def seeded_tokens(sub: Callable[..., Any], row: np.ndarray, seeds: np.ndarray, step: int) -> np.ndarray:
    """The token of ``row`` for each seed in ``seeds`` at ``step`` (one row per seed, chunked)."""
    per = max(1, LAW_CHUNK // row.size)
    out = []
    for i in range(0, seeds.size, per):
        s = seeds[i:i + per].astype(np.int64)
        x = np.repeat(row[None, :].astype(np.float32), s.size, axis=0)
        out.append(np.asarray(sub(FN, x, s, step, 0)))
    return np.concatenate(out).astype(np.int64)


def repeated_steps(sub: Callable[..., Any], row: np.ndarray, seeds: np.ndarray, steps: int) -> int:
    """How many (seed, step) pairs give the same token as that seed's previous step: one seed's
    stream must advance from step to step (each step reads fresh uniforms)."""
    tokens = np.stack([seeded_tokens(sub, row, seeds, s) for s in range(steps)])
    return int((tokens[1:] == tokens[:-1]).sum())


def repeat_limit(probs: np.ndarray, pairs: int, alpha: float = STREAM_ALPHA) -> int:
    """The largest count of repeats a correct engine exceeds with probability <= ``alpha``: with
    independent steps a repeat has probability Σp² (float32 rounding of p moves it by < 1e-6
    relative; 1e-3 is allowed), so the count is Binomial(pairs, Σp²)."""
    from scipy.stats import binom

    q = min(1.0, float((probs.astype(np.float64) ** 2).sum()) * (1 + 1e-3))
    return int(binom.isf(alpha, pairs, q))


def check_law_over_seeds(sub: Callable[..., Any], law_row: tuple[str, int, int, int]) -> None:
    """One row, one seed per draw (seeds base..base + N, the same step): the tokens follow
    softmax(row), judged by the χ² gate at N = max(POWER_N, sample_size(V)) (99 % power at TVD
    0.02; a correct engine fails with probability <= 1e-10, ``properties.stats``)."""
    from oracle.engines.settings import softmax
    from properties.failure import Failure
    from properties.stats import POWER_N, gof_samples, sample_size

    family, vocab, seed, step = law_row
    row = make_logits(family, vocab, seed)
    probs = softmax(row.astype(np.float64))
    n = max(POWER_N, sample_size(int((probs > 0).sum())))
    ids = seeded_tokens(sub, row, np.arange(n, dtype=np.int64) + 10_000 * seed, step)
    res = gof_samples(ids, probs)
    if not res.passed:
        raise Failure(f"draws over seeds do not follow softmax: {res.describe()}", property="law over seeds",
                      record=FN, case=f"make_logits({family!r}, {vocab}, {seed}), seeds {10_000 * seed}.. +{n}, "
                                      f"step {step}", category="distribution")


def check_stream_advances(sub: Callable[..., Any], _: Any = None) -> None:
    """A seed's tokens at steps 0..S-1 on a flat row of 1,000 tokens: a repeat of the previous
    step's token has probability Σp² ≈ 1e-3 per pair, so more than ``repeat_limit`` repeats over
    200 seeds × 4 pairs has probability <= 1e-10 for a correct engine; a stream that re-reads the
    same uniforms at every step repeats on every pair."""
    from oracle.engines.settings import softmax
    from properties.failure import Failure

    row = make_logits("flat", STREAM_VOCAB, 64)
    seeds = np.arange(STREAM_SEEDS, dtype=np.int64) * 7919 + 1
    pairs = STREAM_SEEDS * (STREAM_STEPS - 1)
    n = repeated_steps(sub, row, seeds, STREAM_STEPS)
    limit = repeat_limit(softmax(row.astype(np.float64)), pairs)
    if n > limit:
        raise Failure(f"{n} of {pairs} (seed, step) pairs repeat the previous step's token; a correct stream "
                      f"repeats at most {limit} (P <= {STREAM_ALPHA:g}): the stream does not advance with the step",
                      property="stream advances", record=FN,
                      case=f"make_logits('flat', {STREAM_VOCAB}, 64), seeds {seeds[:3].tolist()}.., steps 0..{STREAM_STEPS - 1}")
