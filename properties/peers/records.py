"""The llama.cpp peer table: one record per sampler, naming how to build the oracle and the peer
with the same (float32-exact) parameters, which inputs to draw, and what state to feed them.

Every float parameter is drawn at float32 width, so oracle and llama.cpp see the same value.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np
from hypothesis import strategies as st

from oracle import samplers as s
from oracle.samplers.base import Sampler
from properties.peers import llama_cpp as peer
from properties.samplers.strategies import FAMILIES

Params = dict


def _inward(x: float, up: bool) -> float:
    y = np.float32(x)
    if (up and y < x) or (not up and y > x):
        y = np.nextafter(y, np.float32(np.inf if up else -np.inf))
    return float(y)


def f32(lo: float, hi: float, *special: float) -> st.SearchStrategy[float]:
    """float32 values in [lo, hi] (bounds rounded inwards), plus the listed special values."""
    drawn = st.floats(_inward(lo, True), _inward(hi, False), width=32, allow_nan=False)
    specials = [float(np.float32(x)) for x in special]
    return st.one_of(st.sampled_from(specials), drawn) if special else drawn


def seed() -> st.SearchStrategy[int]:
    return st.integers(0, 2**32 - 2)  # 0xFFFFFFFF means "random" in llama.cpp


@dataclass(frozen=True)
class PeerRecord:
    name: str
    params: Callable[[int], st.SearchStrategy[Params]]
    oracle: Callable[[Params, int], Sampler]
    peer: Callable[[Params, int], peer.PeerSampler]
    families: tuple[str, ...] = tuple(FAMILIES)
    history: bool = False  # accept a drawn token history before the single-step apply
    stream: str = ""  # "" stateless; "own" = accept the selected token; "fed" = accept a fixed stream

    def __repr__(self) -> str:
        return self.name


def _history(vocab: int) -> st.SearchStrategy[list[int]]:
    # a small alphabet, so that penalties count repeats and DRY finds repeated suffixes
    small = st.integers(0, min(vocab, 6) - 1)
    return st.lists(st.one_of(small, small, st.integers(0, vocab - 1)), max_size=40)


def _breakers(vocab: int) -> st.SearchStrategy[list[list[int]]]:
    return st.lists(st.lists(st.integers(0, min(vocab, 6) - 1), min_size=1, max_size=3), max_size=3)


_NO_UNDERFLOW = ("peaked", "flat", "zipf", "plateaus", "near_ties")  # typical: no p underflows to 0
# logits >= 3.3e8 break llama.cpp's bucket sort (finding "bucket-sort-int-overflow"): the
# samplers that sort draw every family but "huge"; top_k keeps it (k <= 128 sorts correctly)
_SORTABLE = tuple(f for f in FAMILIES if f != "huge")

RECORDS: list[PeerRecord] = [
    PeerRecord("greedy", lambda v: st.just({}), lambda p, v: s.greedy(), lambda p, v: peer.greedy()),
    PeerRecord("dist", lambda v: st.fixed_dictionaries({"seed": seed()}),
               lambda p, v: s.dist(p["seed"]), lambda p, v: peer.dist(p["seed"]), stream="own"),
    PeerRecord("temp", lambda v: st.fixed_dictionaries({"t": f32(0.05, 4.0, 1.0, 0.0, -1.0, 0.8)}),
               lambda p, v: s.temp(p["t"]), lambda p, v: peer.temp(p["t"])),
    PeerRecord("temp_ext", lambda v: f32(0.1, 3.0).flatmap(lambda t: st.fixed_dictionaries({
                   "t": st.just(t), "delta": f32(0.0, 0.9 * t, 0.0), "exponent": f32(0.25, 3.0, 1.0)})),
               lambda p, v: s.temp_ext(p["t"], p["delta"], p["exponent"]),
               lambda p, v: peer.temp_ext(p["t"], p["delta"], p["exponent"]),
               families=("peaked", "flat", "zipf", "plateaus", "near_ties", "one_finite")),
    PeerRecord("top_k", lambda v: st.fixed_dictionaries({"k": st.one_of(st.sampled_from([-1, 0, 1, 40, v, v + 3]),
                                                                         st.integers(1, v))}),
               lambda p, v: s.top_k(p["k"]), lambda p, v: peer.top_k(p["k"])),
    PeerRecord("top_p", lambda v: st.fixed_dictionaries({"p": f32(0.0, 1.0, 0.0, 0.5, 0.95, 1.0),
                                                         "min_keep": st.sampled_from([0, 1, 3])}),
               lambda p, v: s.top_p(p["p"], p["min_keep"]), lambda p, v: peer.top_p(p["p"], p["min_keep"]),
               families=_SORTABLE),
    PeerRecord("min_p", lambda v: st.fixed_dictionaries({"p": f32(0.0, 1.0, 0.0, 0.05, 0.5, 1.0, 1.05),
                                                         "min_keep": st.sampled_from([0, 1, 3])}),
               lambda p, v: s.min_p(p["p"], p["min_keep"]), lambda p, v: peer.min_p(p["p"], p["min_keep"]),
               families=_SORTABLE),
    PeerRecord("typical", lambda v: st.fixed_dictionaries({"p": f32(0.0, 1.0, 0.0, 0.5, 0.95, 1.0),
                                                           "min_keep": st.sampled_from([0, 1, 3])}),
               lambda p, v: s.typical(p["p"], p["min_keep"]), lambda p, v: peer.typical(p["p"], p["min_keep"]),
               families=_NO_UNDERFLOW),
    PeerRecord("xtc", lambda v: st.fixed_dictionaries({"probability": f32(0.0, 1.0, 0.0, 0.5, 1.0),
                                                       "threshold": f32(0.0, 0.6, 0.1, 0.3, 0.5, 0.6),
                                                       "min_keep": st.sampled_from([0, 1, 3]), "seed": seed()}),
               lambda p, v: s.xtc(p["probability"], p["threshold"], p["min_keep"], p["seed"]),
               lambda p, v: peer.xtc(p["probability"], p["threshold"], p["min_keep"], p["seed"]),
               families=_SORTABLE, stream="fed"),
    PeerRecord("top_n_sigma", lambda v: st.fixed_dictionaries({"n": f32(0.0, 5.0, -1.0, 0.0, 1.0, 2.0)}),
               lambda p, v: s.top_n_sigma(p["n"]), lambda p, v: peer.top_n_sigma(p["n"])),
    PeerRecord("logit_bias", lambda v: st.fixed_dictionaries({"biases": st.lists(st.tuples(
                   st.integers(0, v - 1), st.one_of(f32(-30.0, 30.0), st.just(float("-inf")))), max_size=6)}),
               lambda p, v: s.logit_bias(v, p["biases"]), lambda p, v: peer.logit_bias(v, p["biases"])),
    PeerRecord("penalties", lambda v: st.fixed_dictionaries({
                   "last_n": st.sampled_from([0, 1, 3, 8, 64]), "repeat": f32(0.2, 3.0, 1.0, 1.1, 50.0),
                   "freq": f32(-2.0, 2.0, 0.0, 0.5), "present": f32(-2.0, 2.0, 0.0, 0.25), "history": _history(v)}),
               lambda p, v: s.penalties(p["last_n"], p["repeat"], p["freq"], p["present"]),
               lambda p, v: peer.penalties(p["last_n"], p["repeat"], p["freq"], p["present"], n_vocab=v),
               history=True, stream="fed"),
    PeerRecord("dry", lambda v: st.fixed_dictionaries({
                   "multiplier": f32(0.0, 3.0, 0.0, 0.8), "base": f32(0.5, 3.0, 1.0, 1.75),
                   "allowed_length": st.integers(0, 4), "last_n": st.sampled_from([0, 2, 8, 64]),
                   "breakers": _breakers(v), "history": _history(v)}),
               lambda p, v: s.dry(p["multiplier"], p["base"], p["allowed_length"], p["last_n"], p["breakers"]),
               lambda p, v: peer.dry(p["multiplier"], p["base"], p["allowed_length"], p["last_n"], p["breakers"]),
               history=True, stream="fed"),
    PeerRecord("mirostat", lambda v: st.fixed_dictionaries({"seed": seed(), "tau": f32(0.5, 4.0, 3.0),
                                                            "eta": f32(0.0, 1.0, 0.1), "m": st.sampled_from([2, 10, 100])}),
               lambda p, v: s.mirostat(v, p["seed"], p["tau"], p["eta"], p["m"]),
               lambda p, v: peer.mirostat(v, p["seed"], p["tau"], p["eta"], p["m"]),
               families=("zipf",), stream="own"),
    PeerRecord("mirostat_v2", lambda v: st.fixed_dictionaries({"seed": seed(), "tau": f32(0.5, 10.0, 5.0),
                                                               "eta": f32(0.0, 1.0, 0.1)}),
               lambda p, v: s.mirostat_v2(p["seed"], p["tau"], p["eta"]),
               lambda p, v: peer.mirostat_v2(p["seed"], p["tau"], p["eta"]), families=_SORTABLE, stream="own"),
    PeerRecord("adaptive_p", lambda v: st.fixed_dictionaries({"target": f32(-1.0, 1.2, -1.0, 0.5, 1.2),
                                                              "decay": f32(0.0, 1.0, 0.9, 0.99, 1.0), "seed": seed()}),
               lambda p, v: s.adaptive_p(p["target"], p["decay"], p["seed"]),
               lambda p, v: peer.adaptive_p(p["target"], p["decay"], p["seed"]), stream="own"),
]
RECORDS_BY_NAME = {r.name: r for r in RECORDS}

