"""Is MLX's answer legal? A ``Legal`` for the peers' one judge (``properties.peers.legality``),
built from the named variant ``oracle.engines.mlx``.

MLX's chain leaves a masked row (survivors keep their logprobs, the rest -inf) in token order,
as HF's warpers do, so the builder is the kept-set builder of the HF peer
(``transformers.legality.legal_kept``) with MLX's thresholds: top_p (a mass: keeps more as it
grows) and min_p (a ratio: keeps fewer as it grows), moved by the float32 allowance
``delta_for`` (the cumulative sum of n float32 probabilities, exp's rounding of the largest
logprob). Tie classes are the variant's pre-truncation logprobs: ``argpartition`` and
``mx.sort`` leave the order of equal values unspecified. Probabilities are the law of the draw,
softmax(survivors / t), compared as sorted values where the class counts are the variant's.
"""
from __future__ import annotations

import numpy as np

from oracle.candidates import TokenDataArray
from oracle.engines import Settings
from oracle.engines import mlx as o_mlx
from properties.peers.legality import Verdict, check
from properties.peers.transformers.legality import answer, delta_for, legal_kept

THRESHOLDS = {"p": 1, "m": -1}  # +1: a larger value keeps more tokens


def _settings(s: Settings, params: dict) -> Settings:
    return s.with_(top_p=params["p"], min_p=params["m"])


def key(row: np.ndarray, s: Settings) -> np.ndarray:
    """The scores the chain ranks (the penalised logprobs), divided by t: the tie classes."""
    x = o_mlx.penalised(row, s)
    return (x - x.max()) / _law_t(s)


def _law_t(s: Settings) -> float:
    return float(s.temperature) if float(s.temperature) != 0.0 else 1.0


def judge(row: np.ndarray, s: Settings, real: np.ndarray, dtype: str = "float32") -> tuple[Verdict, dict]:
    """MLX's survivors ``real`` (its logprobs, -inf removed) on ``row`` with ``s`` against the
    variant's bracket; the verdict and the two kept sets."""
    t = _law_t(s)
    k = key(row, s)
    params = {"p": float(s.top_p), "m": float(s.min_p)}
    thresholds = {n: g for n, g in THRESHOLDS.items() if (n == "p" and s.top_p < 1.0) or (n == "m" and s.min_p != 0)}

    def oracle(pp: dict) -> np.ndarray:
        m = o_mlx.masked(row, _settings(s, pp))
        return m / t

    legal = legal_kept(dtype, k, oracle, thresholds, params, delta_for(dtype, k))
    out = answer(np.asarray(real, dtype=np.float64) / t)
    verdict = check(legal, TokenDataArray.from_logits(k), out)
    return verdict, {"mlx": out.ids.tolist(), "variant": legal.oracle.ids.tolist()}
