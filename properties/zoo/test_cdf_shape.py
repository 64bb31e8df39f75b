"""The one-CDF judge (properties/cdf_shape.py) both ways, on fixed rows of 32,000 to 262,144
tokens: every conforming dist passes (the zoo's engines, gpu_impl, a dist whose float32
normaliser is a sequential sum while its CDF is summed in double: a common factor, and under the
default contract a float32 running total: rand's ``WeightedIndex<f32>`` as candle and mistral.rs
sample, and llama.cpp's dist with its running sum declared float); under ``--contract strict``,
which demands llama.cpp's double running sum, the float running sum fails where the row makes it
drift or stall; CDFs that break the law (fp16 running sums, bf16 probabilities) fail under both.
Deterministic: fixed rows, no hypothesis."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

import gpu_impl
from properties import cdf_shape
from properties import numerics as nm
from properties.samplers.strategies import make_logits
from properties.zoo.conforming import MEMBERS
from properties.zoo.near_threshold import mutant_modules
from properties.zoo.dist_engines import seq_normaliser_wide_cdf, weighted_index_f32
from properties.zoo.samplers import value_bugs

F32 = np.float32
CONFORMING_ROWS = [("zipf", 32000, 4), ("peaked", 32000, 4), ("flat", 262144, 3)]
BUG_ROWS = [("zipf", 32000, 4), ("peaked", 32000, 4)]


def _judge(dist, fam: str, v: int, seed: int, c: nm.Contract | None = None) -> cdf_shape.OneCdf:
    row = make_logits(fam, v, seed, "float32")
    u = cdf_shape.uniforms(row.astype(np.float64))
    per = max(1, 1_000_000 // v)
    ids = np.concatenate([dist(np.repeat(row[None], u[i:i + per].size, 0), u[i:i + per]) for i in range(0, u.size, per)])
    return cdf_shape.judge(row.astype(np.float64), u, ids, c or nm.DEFAULT)


def _conforming() -> dict:
    out = {"gpu_impl": gpu_impl.dist, "seq_normaliser_wide_cdf": seq_normaliser_wide_cdf}
    out.update({m: importlib.import_module(f"properties.zoo.conforming.{m}").dist for m in MEMBERS})
    return out


@pytest.mark.parametrize("fam, v, seed", CONFORMING_ROWS, ids=lambda x: str(x))
def test_conforming_dists_follow_one_cdf(fam, v, seed):
    ratios = {name: _judge(dist, fam, v, seed).ratio for name, dist in _conforming().items()}
    assert max(ratios.values()) <= 1, ratios  # measured: at most 0.10 (the sequential normaliser)


def _float_running_sums() -> dict:
    return {"weighted_index_f32": weighted_index_f32,
            "dist_float_running_sum": mutant_modules("dist_float_running_sum")[0].dist}


@pytest.mark.parametrize("fam, v, seed", CONFORMING_ROWS, ids=lambda x: str(x))
def test_a_float_running_total_passes_by_default(fam, v, seed):
    """The arithmetic a correct float32 engine may do: a float32 running total's drift and its
    stall after a spike stay inside γ_{k-1} of each prefix (numerics.DIST_CDF_DEFAULT)."""
    ratios = {name: _judge(dist, fam, v, seed).ratio for name, dist in _float_running_sums().items()}
    assert max(ratios.values()) <= 1, ratios


@pytest.mark.parametrize("fam, v, seed", BUG_ROWS, ids=lambda x: str(x))
def test_a_float_running_sum_fails_strict(fam, v, seed):
    """--contract strict demands llama.cpp's double running sum: a float one is told so."""
    for name, dist in _float_running_sums().items():
        res = _judge(dist, fam, v, seed, nm.STRICT)
        assert not res.passed and res.ratio > 2, f"{name}: {res.describe()}"
        assert "no common normaliser" in res.describe() and "Change:" in res.describe()
    assert _judge(gpu_impl.dist, fam, v, seed, nm.STRICT).passed


# a CDF drifting past any accepted scan's γ_d; bf16 probabilities err per token with random signs,
# which the stratified grid sees (properties/zoo/test_dist_contract.py), not one CDF's shape
LAW_BREAKERS = {"dist_fp16_cdf": value_bugs.dist_fp16_cdf(gpu_impl)}


@pytest.mark.parametrize("fam, v, seed", BUG_ROWS, ids=lambda x: str(x))
@pytest.mark.parametrize("name", sorted(LAW_BREAKERS))
def test_a_cdf_that_breaks_the_law_fails_by_default(name, fam, v, seed):
    res = _judge(LAW_BREAKERS[name], fam, v, seed)
    assert not res.passed and res.ratio > 2, res.describe()
    assert "Change:" in res.describe()
