"""Dequantization throughput (bytes of quantized input per second) of the oracle, gpu_impl on
NumPy, and gguf-py, for Q4_K and Q8_0 on a 64 MiB tensor.

Not collected by default (the file is not test_*.py, and CI passes --benchmark-skip). Run:
    python -m pytest properties/quants/bench_dequantize.py -o addopts="" -p properties.plugin --benchmark-only
"""
from __future__ import annotations

import gguf
import numpy as np
import pytest

import gpu_impl.quants as gq
import oracle.quants as oq
from oracle.quants import QType

MIB = 1 << 20
ROW = 4096


def big_tensor(qtype: QType, nbytes: int = 64 * MIB, seed: int = 0) -> tuple[np.ndarray, tuple[int, int]]:
    """~``nbytes`` of random blocks with finite f16 scales (N(0, 0.01))."""
    bs, ts = oq.BLOCK[qtype]
    row_bytes = ROW // bs * ts
    rows = nbytes // row_bytes
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 256, rows * row_bytes, dtype=np.uint8)
    blocks = raw.reshape(-1, ts)
    scale_at = {QType.Q8_0: (0,), QType.Q4_K: (0, 2)}[qtype]
    for at in scale_at:
        blocks[:, at:at + 2] = (rng.standard_normal(blocks.shape[0]) * 0.01).astype("<f2").view(np.uint8).reshape(-1, 2)
    return raw, (rows, ROW)


DECODERS = {
    "oracle": lambda raw, qt, shape: oq.dequantize(raw, qt, shape),
    "gpu_impl-numpy": lambda raw, qt, shape: gq.dequantize(raw, int(qt), shape),
    "gguf-py": lambda raw, qt, shape: gguf.quants.dequantize(raw.reshape(shape[0], -1), gguf.GGMLQuantizationType(int(qt))),
}


@pytest.mark.benchmark
@pytest.mark.parametrize("who", list(DECODERS))
@pytest.mark.parametrize("qtype", [QType.Q4_K, QType.Q8_0], ids=lambda q: q.name)
def test_dequantize_throughput(benchmark, who, qtype):
    raw, shape = big_tensor(qtype)
    fn = DECODERS[who]
    out = benchmark.pedantic(fn, args=(raw, qtype, shape), rounds=3, iterations=1, warmup_rounds=0)
    assert out.shape == shape
    benchmark.extra_info.update({"bytes": raw.size, "MB_per_s": raw.size / benchmark.stats["min"] / 1e6})
