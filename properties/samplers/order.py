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

from properties.samplers.strategies import floats32

from oracle import samplers as s
from oracle.candidates import TokenDataArray

SAMPLERS = ("temp", "top_k", "top_p", "min_p", "typical", "top_n_sigma", "penalties", "logit_bias")
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
}


def build(name: str, p: dict, vocab: int) -> s.Sampler:
    if name == "temp":
        return s.temp(p["t"])
    if name == "top_k":
        return s.top_k(p["k"])
    if name in ("top_p", "min_p", "typical"):
        return getattr(s, name)(p[name], 0)
    if name == "top_n_sigma":
        return s.top_n_sigma(p["n"])
    if name == "penalties":
        smp = s.penalties(16, p["repeat"], p["freq"], p["present"])
        for t in p["history"]:
            smp.accept(t % vocab)
        return smp
    return s.logit_bias(vocab, [(t % vocab, b) for t, b in p["bias"]])


def params(pair: tuple[str, str], exact_temp: bool) -> st.SearchStrategy[dict]:
    """Only the pair's own parameters, so the shrinker searches a small space."""
    temps = st.sampled_from([0.25, 0.5, 2.0, 4.0]) if exact_temp else floats32(0.1, 4.0)
    return st.fixed_dictionaries({k: v for k, v in {
        "t": temps, "k": st.integers(1, 8), "top_p": floats32(0.05, 0.99),
        "min_p": floats32(0.01, 0.9), "typical": floats32(0.05, 0.99),
        "n": floats32(0.1, 3.0), "repeat": floats32(0.5, 2.0),
        "freq": floats32(-1.0, 1.0), "present": floats32(-1.0, 1.0),
        "history": st.lists(st.integers(0, 63), max_size=4),
        "bias": st.lists(st.tuples(st.integers(0, 63), floats32(-5, 5)), max_size=3),
    }.items() if _uses(pair, k)})


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


def _uses(pair: tuple[str, str], key: str) -> bool:
    owner = {"t": "temp", "k": "top_k", "top_p": "top_p", "min_p": "min_p", "typical": "typical",
             "n": "top_n_sigma", "repeat": "penalties", "freq": "penalties", "present": "penalties",
             "history": "penalties", "bias": "logit_bias"}
    return owner[key] in pair


def pair_id(pair: tuple[str, str]) -> str:
    return f"{pair[0]}-{pair[1]}"


PAIRS = sorted(tuple(sorted(p, key=SAMPLERS.index)) for p in EXPECTED)
assert math.comb(len(SAMPLERS), 2) == len(PAIRS)
