"""Sampler speed targets (pytest-benchmark; never run by CI).

1. The oracle's default chain on 1 × 262,144 fp32 logits vs llama.cpp's own chain (through
   llama-cpp-python, same process, same array construction cost): target ratio <= 3.
2. gpu_impl on NumPy, a 64 × 262,144 batched default chain vs the oracle looping over the rows:
   target >= 20× faster, with peak traced NumPy memory <= 4 GiB.

Run:
    python -m pytest properties/samplers/bench_chain.py -o addopts="" -p properties.plugin --benchmark-only -s
"""
from __future__ import annotations

import ctypes
import time
import tracemalloc

import numpy as np
import pytest

import gpu_impl
from oracle.chain import SamplingParams, default_chain

V, B = 262_144, 64
PARAMS = SamplingParams(seed=1234)
RATIOS: dict[str, float] = {}


def _logits(batch: int, seed: int = 0) -> np.ndarray:
    return (np.random.default_rng(seed).standard_normal((batch, V)) * 3).astype(np.float32)


def oracle_sample(row: np.ndarray) -> int:
    return default_chain(PARAMS, V).sample(row)


def llama_sample(row: np.ndarray) -> int:
    lc = pytest.importorskip("llama_cpp")
    chain = lc.llama_sampler_chain_init(lc.llama_sampler_chain_default_params())
    for smp in (lc.llama_sampler_init_top_k(40), lc.llama_sampler_init_top_p(0.95, 0),
                lc.llama_sampler_init_min_p(0.05, 0), lc.llama_sampler_init_temp_ext(0.8, 0.0, 1.0),
                lc.llama_sampler_init_dist(1234)):
        lc.llama_sampler_chain_add(chain, smp)
    data = np.zeros(V, dtype=[("id", "<i4"), ("logit", "<f4"), ("p", "<f4")])
    data["id"], data["logit"] = np.arange(V), row
    arr = lc.llama_token_data_array(data=data.ctypes.data_as(ctypes.POINTER(lc.llama_token_data)), size=V,
                                    selected=-1, sorted=False)
    lc.llama_sampler_apply(chain, ctypes.byref(arr))
    token = int(data["id"][arr.selected])
    lc.llama_sampler_free(chain)
    return token


def impl_batch(x: np.ndarray, u: np.ndarray) -> np.ndarray:
    y = gpu_impl.top_k(x, 40)
    y = gpu_impl.top_p(y, 0.95)
    y = gpu_impl.min_p(y, 0.05)
    y = gpu_impl.temp(y, 0.8)
    return gpu_impl.dist(y, u)


def _best(fn, *args, rounds: int = 3) -> float:
    best = np.inf
    for _ in range(rounds):
        t = time.perf_counter()
        fn(*args)
        best = min(best, time.perf_counter() - t)
    return best


def test_oracle_chain_vs_llama_cpp(benchmark):
    row = _logits(1)[0]
    benchmark.pedantic(oracle_sample, args=(row,), rounds=50, warmup_rounds=5)
    llama = _best(llama_sample, row, rounds=20)
    ratio = benchmark.stats.stats.min / llama
    print(f"\noracle {benchmark.stats.stats.min * 1e3:.3f} ms, llama.cpp {llama * 1e3:.3f} ms (best of 20)")
    benchmark.extra_info["oracle/llama.cpp"] = RATIOS["oracle/llama.cpp"] = ratio
    print(f"\noracle default chain / llama.cpp chain, 1 x {V}: {ratio:.2f}x (target <= 3)")
    assert ratio <= 3


def test_impl_batch_vs_oracle_rows(benchmark):
    x, u = _logits(B, 1), np.random.default_rng(2).random(B)
    tracemalloc.start()
    benchmark.pedantic(impl_batch, args=(x, u), rounds=3, iterations=1)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    per_row = _best(lambda: [oracle_sample(r) for r in x[:8]], rounds=1) / 8
    ratio = per_row * B / benchmark.stats.stats.min
    benchmark.extra_info.update({"speedup": ratio, "peak_bytes": peak})
    print(f"\ngpu_impl (NumPy) {B} x {V} batch vs oracle rows: {ratio:.1f}x faster (target >= 20); "
          f"peak traced memory {peak / 2**30:.2f} GiB (target <= 4)")
    assert ratio >= 20 and peak <= 4 * 2**30
