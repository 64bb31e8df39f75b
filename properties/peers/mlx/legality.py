"""Is MLX's answer legal? A ``Legal`` for the peers' one judge (``properties.peers.legality``),
built from the named variant ``oracle.engines.mlx``.

MLX's chain leaves a masked row (survivors keep their logprobs, the rest -inf) in token order,
as HF's warpers do, so the builder is the kept-set builder of the HF peer
(``transformers.legality.legal_kept``) with MLX's thresholds: top_p (a mass: keeps more as it
grows) and min_p (a ratio: keeps fewer as it grows), moved by the float32 allowance
``delta_for`` (the cumulative sum of n float32 probabilities, exp's rounding of the largest
logprob). Tie classes are the variant's pre-truncation scores: ``argpartition`` and ``mx.sort``
leave the order of equal values unspecified. Probabilities are the law of the draw,
softmax(survivors / t), compared as sorted values where the class counts are the variant's
(float32); float16 and bfloat16 rows are judged on their kept sets (``outside``).
"""
from __future__ import annotations

import numpy as np

from oracle.candidates import TokenDataArray
from oracle.engines import Settings
from oracle.engines import mlx as o_mlx
from properties.numerics import half_logprob_allowance
from properties.peers.kept_set import outside_bracket, tie_classes
from properties.peers.legality import Verdict, check
from properties.peers.transformers.legality import answer, delta_for, legal_kept, shift

THRESHOLDS = {"p": 1, "m": -1}  # +1: a larger value keeps more tokens


def _settings(s: Settings, params: dict) -> Settings:
    return s.with_(top_p=params["p"], min_p=params["m"])


def key(row: np.ndarray, s: Settings) -> np.ndarray:
    """The scores the chain ranks and cuts: the penalised logits minus their maximum, untempered
    (the filters run before the temperature): the tie classes and the float allowance's scale."""
    x = o_mlx.penalised(row, s)
    return x - x.max()


def _law_t(s: Settings) -> float:
    return float(s.temperature) if float(s.temperature) != 0.0 else 1.0


def _thresholds(s: Settings) -> dict:
    return {n: g for n, g in THRESHOLDS.items() if (n == "p" and s.top_p < 1.0) or (n == "m" and s.min_p != 0)}


def judge(row: np.ndarray, s: Settings, real: np.ndarray, dtype: str = "float32") -> tuple[Verdict, dict]:
    """MLX's survivors ``real`` (its logprobs, -inf removed) on ``row`` with ``s`` against the
    variant's bracket, and the law softmax(survivors / t); the verdict and the two kept sets."""
    t = _law_t(s)
    k = key(row, s)
    params = {"p": float(s.top_p), "m": float(s.min_p)}

    def oracle(pp: dict) -> np.ndarray:
        return o_mlx.masked(row, _settings(s, pp)) / t

    legal = legal_kept(dtype, k, oracle, _thresholds(s), params, delta_for(dtype, k))
    out = answer(np.asarray(real, dtype=np.float64) / t)
    verdict = check(legal, TokenDataArray.from_logits(k), out)
    return verdict, {"mlx": out.ids.tolist(), "variant": legal.oracle.ids.tolist()}


def outside(row: np.ndarray, s: Settings, real: np.ndarray, dtype: str) -> dict:
    """The kept set alone (no probabilities: for float16 / bfloat16 rows, whose log-softmax the
    peers' p tolerance does not cover), by the peers' one kept-set rule: per tie class of the
    dtype's rounded scores, MLX's count between the variant's at thresholds moved by
    ``numerics.half_logprob_allowance``. Empty: legal."""
    k = key(row, s)
    params = {"p": float(s.top_p), "m": float(s.min_p)}
    delta = half_logprob_allowance(o_mlx.penalised(row, s), dtype)

    def kept(pp: dict) -> np.ndarray:
        return np.isfinite(o_mlx.masked(row, _settings(s, pp)))
    cls, merged = tie_classes(k, dtype)
    return outside_bracket(np.isfinite(np.asarray(real)), kept(shift(params, _thresholds(s), False, delta)),
                           kept(shift(params, _thresholds(s), True, delta)), cls, merged)
