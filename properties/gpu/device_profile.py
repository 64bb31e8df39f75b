"""Where a device run's time goes: the host cost of one launch of each kind gpu_impl makes, and
each stage of its kernels replayed alone from a CUDA graph, at 64 x 262,144 and 1 x 262,144
N(0, 3^2) float32 rows (docs/gpu.md's per-launch and per-stage figures come from here).

    python -m properties.gpu.device_profile OUT.json     # on a CUDA device

A lone digit pass is replayed on the state a finished select left, so passes 1 and 2 filter
against an already narrowed prefix, as they do inside a select. Not a test: it asserts nothing.
"""
from __future__ import annotations

import json
import os
import sys
import time
from typing import Any, Callable

import numpy as np

from properties.gpu.device_bench import graph_us
from properties.gpu.device_cases import normal_rows, per_row


def host_us(fn: Callable[[], Any], n: int = 200) -> float:
    """Host wall time per call of ``fn`` (what a launch costs the Python side), after one warm-up."""
    import cupy as cp
    fn()
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    per_call = (time.perf_counter() - t0) / n * 1e6
    cp.cuda.Device().synchronize()
    return per_call


def launch_costs() -> dict[str, float]:
    import cupy as cp

    from gpu_impl.kernels import _build, filters
    p, k = cp.zeros(1, cp.float32), cp.zeros(1, cp.int64)
    buf = cp.empty(48, cp.uint8)
    cols = filters._plan_columns(buf, 1)
    return {"raw kernel launch": host_us(lambda: _build.fn("lc_plan_top_p")((1,), (128,), (
                np.int32(1), np.int64(256), p, k, *cols))),
            "cp.zeros (memset)": host_us(lambda: cp.zeros(1024, cp.uint32)),
            "cp.empty": host_us(lambda: cp.empty(1024, cp.uint32)),
            "CuPy elementwise op (cp.full)": host_us(lambda: cp.full(64, 3, cp.int64)),
            "one word read back (sync)": host_us(lambda: int(buf[0])),
            "stream.is_capturing()": host_us(lambda: cp.cuda.get_current_stream().is_capturing())}


def stage_times(B: int, V: int) -> dict[str, float]:
    import cupy as cp

    from gpu_impl import kernels
    from gpu_impl.kernels import _build, filters, select
    x = cp.asarray(normal_rows(B, V))
    kk, zeros = cp.full(B, 40, cp.int64), cp.zeros(B, cp.int64)
    rm, pp, mm = x.max(axis=1), cp.full(B, 0.95, cp.float32), cp.full(B, 0.05, cp.float32)
    ws = select.select_workspace(B, V)
    cols, per_row_ = _build.span(B, V)
    out = select.empty_prefix(cp, B)

    def one_pass(digit_pass: int, flags: int = 0) -> Callable[[], None]:
        rows = (x, pp, rm, x, x, x) if flags & select.MASS else (kk, x, rm, x, x, x)
        return lambda: _build.fn("lc_radix_pass")((per_row_, B), (_build.THREADS,), (
            x, np.int64(V), np.int64(cols), np.int32(digit_pass), np.int32(flags), *rows, ws))

    select.nth_element(x, kk, None, out, ws=ws)
    t = {f"count pass {i}": graph_us(one_pass(i)) for i in range(3)}
    t["finish (no tie ids needed)"] = graph_us(lambda: _build.fn("lc_radix_finish")((per_row_, B), (_build.THREADS,), (
        x, np.int64(V), np.int64(cols), np.int32(0), ws, out.c, out.cut, out.n, x, x, x)))
    select.mass_crossing(x, pp, rm, None, out, ws=ws)
    t.update({f"mass pass {i}": graph_us(one_pass(i, select.MASS)) for i in range(2)})
    plan = kernels.plan_chain(B, V, 40, 0.95, 0, 0.05, 0, 0.8)
    keep = select.empty_prefix(cp, B)
    select.nth_element(x, kk, None, keep)
    u = cp.asarray(per_row([0.1, 0.5, 0.9], B))
    t.update({"prefix mask": graph_us(lambda: filters.mask_prefix(x, keep)),
              "min_p threshold mask": graph_us(lambda: _build.fn("lc_min_p_mask")(
                  (_build.n_chunks(V), B), (_build.THREADS,), (x, np.int64(V), rm, mm, zeros,
                                                                cp.zeros(3 * B + 1, cp.uint32), cp.empty_like(x)))),
              "row max": graph_us(lambda: kernels.row_max(x)),
              "row stats (chunk max, sum)": graph_us(lambda: kernels.row_stats(x)),
              "dist": graph_us(lambda: kernels.dist_rows(x, rm, u)),
              "softmax": graph_us(lambda: kernels.softmax_rows(x)),
              "top_k": graph_us(lambda: kernels.top_k_rows(x, kk)),
              "min_p (fallback launched, no row short)": graph_us(lambda: kernels.min_p_rows(x, rm, mm, zeros)),
              "top_p (wide nucleus)": graph_us(lambda: kernels.top_p_rows(x, rm, pp, zeros)),
              "chain top_k -> top_p -> min_p -> temp": graph_us(lambda: kernels.chain_rows(x, None, plan))})
    return t


def public_path_profile(B: int, V: int, calls: int = 100, top: int = 25) -> dict[str, Any]:
    """The validated public ``llama_cpp_chain`` + ``dist`` under cProfile (replayed from graphs, as
    they run by default; the eager path's wall time beside it): wall time per call of each piece and the functions with the most own time (the host side's cost, which the
    graph-replayed kernels do not pay), so the next change to that path aims at what it costs."""
    import cProfile
    import io
    import pstats

    import cupy as cp

    import gpu_impl
    from gpu_impl.engines import llama_cpp_chain
    from properties.gpu.device_bench import DEFAULT
    x = cp.asarray(normal_rows(B, V))
    u = cp.asarray(per_row([0.1, 0.5, 0.9], B))
    hist = cp.full((B, 1), -1, cp.int64)
    args = (x, hist, 0, 1.0, 0.0, 0.0, DEFAULT["k"], DEFAULT["p"], DEFAULT["m"], DEFAULT["t"])
    y = llama_cpp_chain(*args)
    timings = {"chain": host_us(lambda: llama_cpp_chain(*args), calls),
               "dist": host_us(lambda: gpu_impl.dist(y, u), calls),
               "chain + dist": host_us(lambda: gpu_impl.dist(llama_cpp_chain(*args), u), calls)}
    os.environ["LOGITCHECK_GRAPHS"] = "0"  # the same calls eager (gpu_impl._graphs off)
    try:
        timings["chain + dist (eager)"] = host_us(lambda: gpu_impl.dist(llama_cpp_chain(*args), u), calls)
    finally:
        del os.environ["LOGITCHECK_GRAPHS"]
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        gpu_impl.dist(llama_cpp_chain(*args), u)
    cp.cuda.Device().synchronize()
    prof.disable()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(top)
    return {"host_us_per_call": timings, "calls": calls, "profile": text.getvalue()}


def main(path: str) -> None:
    result: dict[str, Any] = {"host_us_per_call": launch_costs()}
    for name, us in result["host_us_per_call"].items():
        print(f"host {name:36s} {us:7.1f} us", flush=True)
    for B, V in ((64, 262144), (1, 262144)):
        result[f"graph_us {B}x{V}"] = stages = stage_times(B, V)
        for name, us in stages.items():
            print(f"{B}x{V} {name:40s} {us:7.1f} us", flush=True)
    with open(path, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    if sys.argv[1:2] == ["public"]:  # python -m properties.gpu.device_profile public OUT.json
        got = {f"{B}x{V}": public_path_profile(B, V) for B, V in ((64, 262144), (1, 262144))}
        for shape, r in got.items():
            print(shape, r["host_us_per_call"], "\n", r["profile"], flush=True)
        with open(sys.argv[2] if len(sys.argv) > 2 else "public_profile.json", "w") as f:
            json.dump(got, f, indent=1)
    else:
        main(sys.argv[1] if len(sys.argv) > 1 else "device_profile.json")
