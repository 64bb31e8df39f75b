"""The order matrix: which pairs of llama.cpp samplers commute, as data.

For each unordered pair {A, B} of the listed samplers, ``EXPECTED`` says whether running A then B
gives the same final distribution as B then A (on the oracle). "commute" pairs are proven by a
property over random inputs; "differs" pairs must yield a hypothesis-shrunk witness. Temperatures
in the commute proofs are powers of two, so scaling is exact in float64 and "same" means bitwise
the same distribution (the pairs commute mathematically for every t > 0).
"""
from __future__ import annotations

import itertools
import math

import numpy as np
from hypothesis import strategies as st

from oracle import samplers as s
from oracle.candidates import TokenDataArray
from properties.samplers.records import RECORDS, RECORDS_BY_NAME

SAMPLERS = tuple(r.name for r in RECORDS if r.order is not None)
COMMUTE = {frozenset(p) for p in (("temp", "top_k"), ("temp", "top_n_sigma"), ("top_k", "min_p"))}
EXPECTED = {frozenset(p): ("commute" if frozenset(p) in COMMUTE else "differs")
            for p in itertools.combinations(SAMPLERS, 2)}
WHY = {
    frozenset(("temp", "top_k")): "dividing by t > 0 preserves the order of logits",
    frozenset(("temp", "top_n_sigma")): "max - n·std scales with the logits",
    frozenset(("top_k", "min_p")): "both keep an upper set of logits anchored at the same maximum",
    frozenset(("temp", "top_p")): "top_p's mass depends on t (softmax(l/t) != softmax(l)/t)",
    frozenset(("temp", "min_p")): "min_p's threshold max + ln p moves to max + t·ln p",
    frozenset(("top_k", "top_p")): "top_p after top_k renormalises over k tokens and stops earlier",
    frozenset(("penalties", "temp")): "freq/present are subtracted before or after the division",
    frozenset(("temp", "xtc")): "xtc's threshold is on probabilities, which t reshapes",
    frozenset(("top_k", "xtc")): "after top_k the survivors are renormalised: more of them reach xtc's threshold, "
                                 "and xtc first removes tokens top_k would have kept",
}


def build(name: str, p: dict, vocab: int) -> s.Sampler:
    """The record's oracle from its pair parameters (a name that is no order member raises)."""
    rec = RECORDS_BY_NAME[name]
    if rec.order is None:
        raise KeyError(f"sampler {name!r} is no member of the order matrix (members: {', '.join(SAMPLERS)})")
    kw = rec.order.build(p, vocab)
    smp = rec.build(kw, vocab)
    for t in kw.get("history", ()):
        smp.accept(t)
    return smp


def params(pair: tuple[str, str], exact_temp: bool) -> st.SearchStrategy[dict]:
    """Only the pair's own parameters, so the shrinker searches a small space."""
    return st.fixed_dictionaries({k: v for name in sorted(pair, key=SAMPLERS.index)
                                  for k, v in RECORDS_BY_NAME[name].order.params(exact_temp).items()})


def small_logits(max_vocab: int = 8) -> st.SearchStrategy[list[float]]:
    """Witness-sized rows: a few float32 values on a coarse grid so shrunk witnesses read well."""
    return st.lists(st.integers(-40, 40).map(lambda i: i / 8), min_size=2, max_size=max_vocab)


def distribution(order: tuple[str, str], logits: list[float], p: dict) -> np.ndarray:
    cur = TokenDataArray.from_logits(np.asarray(logits, dtype=np.float32))
    for name in order:
        build(name, p, len(logits)).apply(cur)
    return cur.distribution(len(logits))


def tvd(a: np.ndarray, b: np.ndarray) -> float:
    return float(0.5 * np.abs(a - b).sum())


def witness_record(pair: tuple[str, str], logits: list[float], p: dict) -> dict:
    a, b = distribution(pair, logits, p), distribution(pair[::-1], logits, p)
    return {"first": pair[0], "second": pair[1], "logits": logits, "params": p, "tvd": tvd(a, b),
            f"{pair[0]}→{pair[1]}": np.round(a, 6).tolist(), f"{pair[1]}→{pair[0]}": np.round(b, 6).tolist()}


def pair_id(pair: tuple[str, str]) -> str:
    return f"{pair[0]}-{pair[1]}"


PAIRS = sorted(tuple(sorted(p, key=SAMPLERS.index)) for p in EXPECTED)
assert math.comb(len(SAMPLERS), 2) == len(PAIRS)
