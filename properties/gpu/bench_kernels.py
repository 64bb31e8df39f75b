"""Speed targets of gpu_impl's CuPy kernels (not run by CI: needs a device and --benchmark-only).

    python -m pytest properties/gpu/bench_kernels.py -o addopts="" -p properties.plugin --benchmark-only -s

Targets, at 64 x 262,144: within 5x of the one-read bandwidth floor for every op, and
>= 5x faster than the torch sort-based reference for the ops whose reference sorts (the k-th
largest, top_k, top_p and the default chain with its draw). softmax, min_p and dist have no
sort to beat (torch's are one or two passes too): their torch time is reported, not targeted.
"""
from __future__ import annotations

import pytest

from properties.gpu.device_bench import DEFAULT, _ours, copy_bandwidth, time_ops
from properties.gpu.device_cases import cp, needs_device, normal_rows, per_row

pytestmark = [needs_device, pytest.mark.benchmark(group="gpu-kernels")]
SORT_BASED = {"kth_largest", "top_k", "top_p", "chain+dist", "chain+dist (graph)"}
TARGETED = (64, 262144)


@pytest.fixture(scope="module")
def bandwidth() -> float:
    return copy_bandwidth()


@pytest.fixture(scope="module")
def timings(bandwidth):
    cache = {}

    def get(shape):
        if shape not in cache:
            cache[shape] = {t.op: t for t in time_ops(*shape, bandwidth)}
        return cache[shape]
    return get


@pytest.mark.parametrize("shape", [(64, 262144), (1, 262144)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("op", ["softmax", "kth_largest", "top_k", "top_p", "min_p", "dist", "chain+dist"])
def test_kernel_speed(benchmark, timings, op, shape):
    B, V = shape
    x = cp.asarray(normal_rows(B, V))
    fn = _ours(x, DEFAULT["k"], DEFAULT["p"], DEFAULT["m"], DEFAULT["t"], cp.asarray(per_row([0.5], B)))[op]
    benchmark.pedantic(lambda: (fn(), cp.cuda.Device().synchronize()), warmup_rounds=5, rounds=30)
    t = timings(shape)[op]
    benchmark.extra_info.update(t.row())
    print(f"\n{op} {t.shape}: {t.row()}")
    if shape == TARGETED:
        assert t.vs_floor <= 5, f"{op}: {t.ours_us:.1f} us is {t.vs_floor:.1f}x the floor ({t.floor_us:.1f} us)"
        if op in SORT_BASED:
            assert t.vs_torch >= 5, f"{op}: only {t.vs_torch:.2f}x the torch sort-based reference"


@pytest.fixture(scope="module")
def public():
    from properties.gpu.device_bench import public_us
    cache = {}

    def get(shape):
        if shape not in cache:
            cache[shape] = public_us(*shape)
        return cache[shape]
    return get


@pytest.mark.parametrize("shape", [(64, 262144), (1, 262144)], ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("call", ["chain then dist", "llama_cpp_chain_dist"])
def test_public_chain_speed(timings, public, shape, call):
    """The validated public chain + dist, as a user calls it (gpu_impl.engines.llama_cpp_chain then
    gpu_impl.dist, or llama_cpp_chain_dist), against its own kernels replayed from a CUDA graph and
    against the torch sort-based reference. Targets: within 1.5x of the graph at 64 x 262,144,
    faster than torch at both sizes. Last measured (H100, 2026-11-27) before the public calls were
    replayed from graphs (gpu_impl._graphs): 1,667 us vs 246.8 us graph vs 1,394 us torch at
    64 x 262,144, host-bound; replayed: not yet timed on a device."""
    t = timings(shape)
    ours, eager = public(shape)[call], public(shape)[f"{call} (eager)"]
    graph, torch_us = t["chain+dist (graph)"].ours_us, t["chain+dist"].torch_us
    print(f"\npublic {call} {shape}: {ours:.1f} us (eager {eager:.1f}); graph {graph:.1f} us; torch {torch_us:.1f} us")
    assert torch_us is None or ours < torch_us, f"public path {ours:.1f} us is slower than torch's {torch_us:.1f} us"
    if shape == TARGETED:
        assert ours <= 1.5 * graph, f"public path {ours:.1f} us is {ours / graph:.1f}x its graph ({graph:.1f} us)"


@pytest.mark.parametrize("shape", [(64, 262144), (1, 262144)], ids=lambda s: f"{s[0]}x{s[1]}")
def test_public_top_p_speed(timings, public, shape):
    """The validated public top_p: within 8x of the one-read floor at 64 x 262,144 and not slower
    than torch's sort-based top_p at one row (575 us vs 312 us from Python on an H200 before the
    replay; the kernels alone were 19.2x the floor there, so the 8x target needs the kernel too)."""
    t = timings(shape)["top_p"]
    ours = public(shape)["top_p"]
    print(f"\npublic top_p {shape}: {ours:.1f} us (eager {public(shape)['top_p (eager)']:.1f}); kernels "
          f"{t.ours_us:.1f} us; floor {t.floor_us:.1f} us; torch {t.torch_us:.1f} us")
    if shape == TARGETED:
        assert ours <= 8 * t.floor_us, f"public top_p {ours:.1f} us is {ours / t.floor_us:.1f}x the floor"
    else:
        assert ours <= t.torch_us, f"public top_p {ours:.1f} us is slower than torch's {t.torch_us:.1f} us"
