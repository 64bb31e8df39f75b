"""The cross-engine conformance matrix: for each pair of engines and each common setting, does
the same user setting give the same sampling distribution?

Per cell hypothesis searches (``find``, derandomized) for a logits row (1/8 grid, ties common)
and a token history (prompt and output) where the kept sets or the distributions differ (TVD >
1e-12; not on a threshold's knife edge, see ``differs``), shrinks it to a witness, then hill-climbs (``target``) for the largest TVD it can cause.
Each difference is labelled with the known semantic differences the setting exercises
(``oracle.engines.mapping.intended_differences``), and a label counts only when removing it
(the engine run with that one trait toggled, ``mapping.without``) makes the witness's difference
vanish: ``explanation`` returns the smallest such set of labels, or None (unexplained).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from oracle.engines import ENGINES, Settings
from oracle.engines.mapping import Difference, Run, intended_differences, knife_edge, tvd, without

ENGINE_ORDER = tuple(ENGINES)  # the spec's engines, llama.cpp first
# the columns backed by a real engine: the variant is judged against that engine at its pinned
# release (``properties/peers/<engine>``), so its matrix cells are that engine's behaviour
REAL = {name: m.PEER for name, m in ENGINES.items() if getattr(m, "PEER", None)}
PAIRS = list(itertools.combinations(ENGINE_ORDER, 2))
TYPICAL = dict(temperature=0.8, top_k=40, top_p=0.95, min_p=0.05, repetition_penalty=1.1)
SETTINGS = {
    "T0.8": Settings(temperature=0.8),
    "T0.8 top_k40": Settings(temperature=0.8, top_k=40),
    "T0.8 top_p0.95": Settings(temperature=0.8, top_p=0.95),
    "T0.8 min_p0.05": Settings(temperature=0.8, min_p=0.05),
    "rep1.1": Settings(repetition_penalty=1.1),
    "presence0.5": Settings(presence_penalty=0.5),
    "frequency0.5": Settings(frequency_penalty=0.5),
    "rep1.1 freq0.5 pres0.5": Settings(repetition_penalty=1.1, frequency_penalty=0.5, presence_penalty=0.5),
    "typical0.9": Settings(typical_p=0.9),
    "T0.8 top_p0.95 typical0.9": Settings(temperature=0.8, top_p=0.95, typical_p=0.9),
    "epsilon3e-4": Settings(epsilon=3e-4),
    "eta3e-4": Settings(eta=3e-4),
    "T0.8 k40 p0.95 min_p0.05 rep1.1": Settings(**TYPICAL),
}
SAME_TVD = 1e-12  # float64 rounding of two different computations of one distribution
Case = tuple  # (logits, prompt, output)


def uses_history(s: Settings) -> bool:
    return s.repetition_penalty != 1.0 or s.presence_penalty != 0.0 or s.frequency_penalty != 0.0


def not_expressible(pair: tuple[str, str], s: Settings) -> str | None:
    """Why the pair cannot be compared at ``s`` (an engine lacks one of its stages), else None."""
    on = s.with_(prompt=(0,)).active()  # count the penalties before a history is drawn
    for e in pair:
        lacks = sorted(on - set(ENGINES[e].SUPPORTS))
        if lacks:
            return f"{e} has no {', '.join(lacks)}"
    return None


@st.composite
def cases(draw, s: Settings, max_vocab: int) -> Case:
    """(logits, prompt, output). Hypothesis draws the structure (sizes, seeds, history shape),
    NumPy fills the values on a 1/8 grid (ties common), so shrinking works on a few integers. With
    top_k the row has more than k tokens (else top_k is a no-op). A "windowed" history puts a
    few early tokens before 64 copies of one token: the early ones fall outside a 64-token window.
    The history is split into prompt and output (vLLM counts presence/frequency on the output only)."""
    n_min = max(2, min(s.top_k + 1, max_vocab)) if s.top_k > 0 else 2
    n = draw(st.integers(n_min, max_vocab), label="vocab")
    levels = draw(st.integers(1, 81), label="levels")  # few levels: large tie classes
    rng = np.random.default_rng(draw(st.integers(0, 2**16), label="seed"))
    grid = rng.choice(np.arange(-40, 41), size=levels, replace=False) / 8
    logits = rng.choice(grid, size=n).tolist()
    hist: list[int] = []
    split = 0
    if uses_history(s):
        kind = draw(st.sampled_from(["short", "windowed"]), label="history")
        early = rng.integers(0, n, int(rng.integers(0, 9 if kind == "windowed" else 21))).tolist()
        hist = early + ([int(rng.integers(0, n))] * 64 if kind == "windowed" else [])
        where = draw(st.sampled_from(["prompt", "output", "both"]), label="split")
        split = {"prompt": len(hist), "output": 0}.get(where) if where != "both" else int(rng.integers(0, len(hist) + 1))
    return logits, tuple(hist[:split]), tuple(hist[split:])


def vocab_cap(pair: tuple[str, str], s: Settings) -> int:
    """candle's exact law is a quadrature per token: keep its rows small; top_k=40 needs > 40 tokens."""
    return 16 if "candle" in pair else (64 if s.top_k else 24)


def exchangeable_classes(logits: np.ndarray, runs: tuple[Run, ...]) -> np.ndarray:
    """Class id per token: tokens whose logits are equal after every compared run's penalties
    (its only history-dependent stage) are treated alike by every later stage, so which of them
    a tie-break drops is unspecified (``torch.sort`` and Rust's ``sort_unstable_by`` are not
    stable); distributions are compared up to relabelling within these classes. A token the
    history touches is still exchangeable with an untouched one its penalty leaves equal (a
    zero logit under a repetition penalty)."""
    keys = np.stack([r.penalised(np.asarray(logits, dtype=np.float64)) for r in runs], axis=1)
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


def outcome(a: Run, b: Run, logits) -> Outcome:
    x = np.asarray(logits, dtype=np.float64)
    return Outcome(a.distribution(x), b.distribution(x), exchangeable_classes(x, (a, b)))


def runs(pair: tuple[str, str], s: Settings, case: Case) -> tuple[Run, Run]:
    _, prompt, output = case
    ss = s.with_(prompt=prompt, output=output)
    return Run(pair[0], ss), Run(pair[1], ss)


def compare(pair: tuple[str, str], s: Settings, case: Case) -> Outcome:
    return outcome(*runs(pair, s, case), case[0])


def differs(pair: tuple[str, str], s: Settings, case: Case) -> bool:
    """The pair differs on this case, and neither engine's kept set turns on how it rounds a
    threshold (``mapping.knife_edge``: an exact-arithmetic equality, not a semantic difference)."""
    x = np.asarray(case[0], dtype=np.float64)
    return compare(pair, s, case).differs and not any(knife_edge(x, r) for r in runs(pair, s, case))


def explanation(a: Run, b: Run, logits, differences: list[Difference]) -> list[Difference] | None:
    """The smallest subset of ``differences`` (greedy, one left out at a time) whose removal
    makes the two runs agree on ``logits``; None when removing all of them leaves a difference."""
    def vanishes(ds: list[Difference]) -> bool:
        return not outcome(*without(ds, a, b), logits).differs

    if not differences or not vanishes(differences):
        return None
    needed = list(differences)
    for d in differences:
        rest = [e for e in needed if e is not d]
        if rest and vanishes(rest):
            needed = rest
    return needed


def witness(pair: tuple[str, str], s: Settings, case: Case) -> dict:
    out = compare(pair, s, case)
    logits, prompt, output = case
    return {"logits": list(logits), "history": list(prompt), "output": list(output), "tvd": out.tvd,
            f"kept:{pair[0]}": np.flatnonzero(out.dist_a > 0).tolist(),
            f"kept:{pair[1]}": np.flatnonzero(out.dist_b > 0).tolist(),
            f"p:{pair[0]}": np.round(out.dist_a, 6).tolist(), f"p:{pair[1]}": np.round(out.dist_b, 6).tolist()}


def labels(pair: tuple[str, str], s: Settings, case: Case) -> list[Difference]:
    return intended_differences(runs(pair, s, case)[0].settings, *pair)
