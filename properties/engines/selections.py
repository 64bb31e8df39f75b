"""Selection records' oracles and legality rules for the engine catalogue: vLLM's exponential
race and candle's Gumbel-max, each run with the uniforms the record drew (one per token)."""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st

from oracle.candidates import TokenDataArray
from oracle.engines import candle as o_candle
from oracle.engines import vllm as o_vllm
from oracle.engines.settings import Settings
from oracle.samplers.base import Sampler
from properties.samplers.record import Params
from properties.numerics import U32, log2n


def ratio_eps(row: np.ndarray, extra: float = 0.0) -> float:
    """How far (in log space) fp32 moves a probability ratio: exp of x - max is relative-accurate
    to u·spread, the sum to log2 n·u; capped where a threshold already means 'keep only the max'
    or 'keep everything'."""
    f = row[np.isfinite(row)]
    spread = float(f.max() - f.min()) if f.size else 0.0
    return min(4 * U32 * (spread + log2n(int(np.isfinite(row).sum())) + 8 + extra), 700.0)


def uniform_rows(b: int, v: int) -> st.SearchStrategy[np.ndarray]:
    """Per-token uniforms from a drawn seed (NumPy fills, hypothesis shrinks the seed)."""
    return st.integers(0, 2**32 - 1).map(lambda s: np.random.default_rng(s).random((b, v)))


class Race(Sampler):
    name = "vllm-race"

    def __init__(self, u: np.ndarray) -> None:
        self.u = u

    def apply(self, cur: TokenDataArray) -> None:
        probs = o_vllm.softmax(cur.dense_logits(cur.n_vocab or None))
        cur.selected = int(np.flatnonzero(cur.ids == o_vllm.race(probs, o_vllm.exponentials(self.u, probs.size)))[0])


def race_legal(row: np.ndarray, p: Params) -> np.ndarray:
    probs = o_vllm.softmax(row)
    q = o_vllm.exponentials(p["u"], row.size)
    with np.errstate(divide="ignore"):
        score = np.where(probs > 0, np.log(probs) - np.log(np.maximum(q, 1e-300)), -np.inf)
    return score >= score.max() - ratio_eps(row)


class Gumbel(Sampler):
    name = "candle-gumbel"

    def __init__(self, t: float, u: np.ndarray) -> None:
        self.t, self.u = t, u

    def apply(self, cur: TokenDataArray) -> None:
        token = o_candle.sample(cur.dense_logits(cur.n_vocab or None), Settings(temperature=self.t), self.u)
        cur.selected = int(np.flatnonzero(cur.ids == token)[0])


def gumbel_legal(row: np.ndarray, p: Params) -> np.ndarray:
    """Tokens whose score l + T·g is within its fp32 rounding (|l| + T·|g|, U rounded) of the best."""
    if p["t"] <= 0:
        out = np.zeros(row.size, dtype=bool)
        out[int(np.argmax(row))] = True
        return out
    g = o_candle.gumbel(p["u"])
    score = np.where(np.isfinite(row), row + p["t"] * g, -np.inf)
    slack = 8 * U32 * (np.abs(np.where(np.isfinite(row), row, 0)).max() + p["t"] * (np.abs(g).max() + 1e3))
    return score >= score.max() - slack
