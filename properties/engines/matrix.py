"""The cross-engine conformance matrix: for each pair of engines and each common setting, does
the same user setting give the same sampling distribution?

Per cell hypothesis searches (``find``, derandomized) for a logits row (1/8 grid, ties common)
and a token history where the kept sets or the distributions differ (TVD > 1e-12), shrinks it
to a witness, then hill-climbs (``target``) for the largest TVD it can cause. Each difference
is labelled with the known semantic differences the setting exercises
(``oracle.engines.mapping.intended_differences``); a difference with no label is unexplained.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from oracle.engines import ENGINES, Settings
from oracle.engines.mapping import intended_differences, tvd

ENGINE_ORDER = ("llama.cpp", "transformers", "vllm", "mistral.rs", "candle")
PAIRS = list(itertools.combinations(ENGINE_ORDER, 2))
TYPICAL = dict(temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, repetition_penalty=1.1)
SETTINGS = {
    "T0.8": Settings(temperature=0.8),
    "T0.8 top_k40": Settings(temperature=0.8, top_k=40),
    "T0.8 top_p0.95": Settings(temperature=0.8, top_p=0.95),
    "T0.8 min_p0.05": Settings(temperature=0.8, min_p=0.05),
    "rep1.1": Settings(repetition_penalty=1.1),
    "T0.8 k40 p0.95 min_p0.05 rep1.1": Settings(**TYPICAL),
}
SAME_TVD = 1e-12  # float64 rounding of two different computations of one distribution


def not_expressible(pair: tuple[str, str], s: Settings) -> str | None:
    """Why the pair cannot be compared at ``s`` (an engine lacks one of its stages), else None."""
    on = s.with_(prompt=(0,)).active()  # count the repetition penalty before a history is drawn
    for e in pair:
        lacks = sorted(on - set(ENGINES[e].SUPPORTS))
        if lacks:
            return f"{e} has no {', '.join(lacks)}"
    return None


@st.composite
def cases(draw, s: Settings, max_vocab: int) -> tuple[list[float], tuple[int, ...]]:
    """(logits, history). Hypothesis draws the structure (sizes, seeds, history shape), NumPy
    fills the values on a 1/8 grid (ties common), so shrinking works on a few integers. With
    top_k the row has more than k tokens (else top_k is a no-op). A "windowed" history puts a
    few early tokens before 64 copies of one token: the early ones fall outside a 64-token window."""
    n_min = max(2, min(s.top_k + 1, max_vocab)) if s.top_k > 0 else 2
    n = draw(st.integers(n_min, max_vocab), label="vocab")
    levels = draw(st.integers(1, 81), label="levels")  # few levels: large tie classes
    rng = np.random.default_rng(draw(st.integers(0, 2**16), label="seed"))
    grid = rng.choice(np.arange(-40, 41), size=levels, replace=False) / 8
    logits = rng.choice(grid, size=n).tolist()
    hist: tuple[int, ...] = ()
    if s.repetition_penalty != 1.0:
        kind = draw(st.sampled_from(["short", "windowed"]), label="history")
        early = rng.integers(0, n, int(rng.integers(0, 9 if kind == "windowed" else 21))).tolist()
        hist = tuple(early + ([int(rng.integers(0, n))] * 64 if kind == "windowed" else []))
    return logits, hist


def vocab_cap(pair: tuple[str, str], s: Settings) -> int:
    """candle's exact law is a quadrature per token: keep its rows small; top_k=40 needs > 40 tokens."""
    return 16 if "candle" in pair else (64 if s.top_k else 24)


def exchangeable_classes(logits: np.ndarray, s: Settings) -> np.ndarray:
    """Class id per token: tokens with equal logits and equal occurrence counts (prompt, output,
    and the last ``repeat_last_n``) are exchangeable under every engine's semantics, so which of
    them a tie-break drops is unspecified (``torch.sort`` and Rust's ``sort_unstable_by`` are not
    stable); distributions are compared up to relabelling within these classes."""
    v = logits.size

    def cnt(ids) -> np.ndarray:
        ids = [i for i in ids if 0 <= i < v]
        return np.bincount(np.asarray(ids, dtype=np.int64), minlength=v) if ids else np.zeros(v, dtype=np.int64)

    window = s.history[-s.repeat_last_n:] if s.repeat_last_n > 0 else ()
    uses_history = bool(s.active() & {"repetition_penalty", "presence_penalty", "frequency_penalty"})
    cols = [logits] + ([cnt(s.prompt), cnt(s.output), cnt(window)] if uses_history else [])
    keys = np.stack(cols, axis=1)
    _, cls = np.unique(keys, axis=0, return_inverse=True)
    return cls.ravel()


def canonical(p: np.ndarray, cls: np.ndarray) -> np.ndarray:
    """Within each class, the probabilities sorted (descending) onto the class's ids in order."""
    out = p.copy()
    for c in np.unique(cls):
        idx = np.flatnonzero(cls == c)
        out[idx] = np.sort(p[idx])[::-1]
    return out


@dataclass
class Outcome:
    dist_a: np.ndarray
    dist_b: np.ndarray
    cls: np.ndarray

    @property
    def tvd(self) -> float:
        """TVD up to relabelling of exchangeable tokens."""
        return tvd(canonical(self.dist_a, self.cls), canonical(self.dist_b, self.cls))

    @property
    def kept_differs(self) -> bool:
        return not np.array_equal(canonical(self.dist_a, self.cls) > 0, canonical(self.dist_b, self.cls) > 0)

    @property
    def differs(self) -> bool:
        return self.kept_differs or self.tvd > SAME_TVD


def compare(pair: tuple[str, str], s: Settings, case) -> Outcome:
    logits, hist = case
    ss = s.with_(prompt=hist)
    x = np.asarray(logits, dtype=np.float64)
    return Outcome(ENGINES[pair[0]].distribution(x, ss), ENGINES[pair[1]].distribution(x, ss),
                   exchangeable_classes(x, ss))


def witness(pair: tuple[str, str], s: Settings, case) -> dict:
    out = compare(pair, s, case)
    logits, hist = case
    return {"logits": list(logits), "history": list(hist), "tvd": out.tvd,
            f"kept:{pair[0]}": np.flatnonzero(out.dist_a > 0).tolist(),
            f"kept:{pair[1]}": np.flatnonzero(out.dist_b > 0).tolist(),
            f"p:{pair[0]}": np.round(out.dist_a, 6).tolist(), f"p:{pair[1]}": np.round(out.dist_b, 6).tolist()}


def labels(pair: tuple[str, str], s: Settings, hist: tuple[int, ...]) -> list[str]:
    return intended_differences(s.with_(prompt=hist), *pair)
