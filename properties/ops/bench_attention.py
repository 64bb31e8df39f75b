"""Speed of gpu_impl.ops (NumPy backend) against the float64 oracle: causal prefill attention,
8 heads × 2,048 positions × head_dim 128. Not run by CI (``--benchmark-skip``); run with

    python -m pytest properties/ops/bench_attention.py -p no:cacheprovider --benchmark-enable --benchmark-only

The oracle loops over heads and queries in float64 (it is a specification, not a kernel); the
implementation does two batched fp32 GEMMs per K/V head group. Both results are also judged
by the attention error model (last 64 queries), so the benchmark cannot time a wrong answer.
"""
from __future__ import annotations

import numpy as np
import pytest

from oracle import ops as oracle_ops
from properties.backends import load_impl
from properties.ops.models import attention_model
from properties.measure import scaled_error
from properties.ops.strategies import OpCase

HEADS, POSITIONS, HEAD_DIM = 8, 2048, 128


@pytest.fixture(scope="module")
def inputs():
    rng = np.random.default_rng(0)
    q, k, v = (rng.normal(size=(POSITIONS, HEADS, HEAD_DIM)).astype(np.float16) for _ in range(3))
    pos = np.arange(POSITIONS, dtype=np.int32)
    return {"q": q, "k": k, "v": v, "q_pos": pos, "k_pos": pos}


@pytest.fixture(scope="module")
def results():
    return {}


@pytest.mark.benchmark(group="attention 8 heads x 2048 x 128 (causal prefill, fp16 in)")
def test_bench_attention_impl_numpy(benchmark, inputs, results):
    ops = load_impl("gpu_impl.ops", "numpy")
    results["impl"] = benchmark.pedantic(lambda: ops("attention", **inputs), rounds=3, iterations=1)


@pytest.mark.benchmark(group="attention 8 heads x 2048 x 128 (causal prefill, fp16 in)")
def test_bench_attention_oracle(benchmark, inputs, results):
    exact = benchmark.pedantic(lambda: oracle_ops.attention(**inputs), rounds=1, iterations=1)
    if "impl" in results:  # judge the last 64 queries (each sees up to 2,048 keys) by the error model
        rows = slice(POSITIONS - 64, POSITIONS)
        case = OpCase("attention", "float16", "normal", 0, {}, {},
                      {**inputs, "q": inputs["q"][rows], "q_pos": inputs["q_pos"][rows]})
        scale, bound = attention_model(case, exact[rows])
        report, _, why = scaled_error(results["impl"][rows], exact[rows], scale, bound)
        assert why is None, why
