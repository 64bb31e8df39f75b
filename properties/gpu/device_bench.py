"""Timings of gpu_impl's CuPy kernels against a torch sort-based reference and the one-read
bandwidth floor (shared by bench_kernels.py and ``logitcheck device-check``).

Floor: the fewest bytes the op must move (each input element read once, each [B, V] output
written once; ids and per-row parameters are negligible) over the device-to-device bandwidth
measured here (a large copy, bytes read + written). Times are CUDA-event times of the median
launch after warm-up (cupyx.profiler.benchmark), so a kernel sequence whose launches cost the
host more than the GPU needs is timed at the host's pace; the chain and the radix select are
also timed replayed from a CUDA graph, which removes that overhead. The row max each op takes
is an input (gpu_impl's validation computes it) and is not timed; the chain's dist uses the
chain's own output max (lc_window_cut writes it).
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Callable

import numpy as np

from properties.gpu.device_cases import normal_rows, per_row

DEFAULT = dict(k=40, p=0.95, m=0.05, t=0.8)  # llama.cpp's default sampler parameters


@dataclass
class Timing:
    op: str
    shape: str
    ours_us: float
    torch_us: float | None
    floor_us: float
    floor_bytes: int

    @property
    def vs_torch(self) -> float | None:
        return None if not self.torch_us else self.torch_us / self.ours_us

    @property
    def vs_floor(self) -> float:
        return self.ours_us / self.floor_us

    def row(self) -> dict[str, Any]:
        d = asdict(self)
        d.update(vs_torch=None if self.vs_torch is None else round(self.vs_torch, 2), vs_floor=round(self.vs_floor, 2))
        return d


def median_us(fn: Callable[[], Any], repeat: int = 30, warmup: int = 5) -> float:
    from cupyx.profiler import benchmark
    res = benchmark(fn, n_repeat=repeat, n_warmup=warmup)
    return float(np.median(res.gpu_times[0]) * 1e6)


def copy_bandwidth(nbytes: int = 1 << 30) -> float:
    """Device-to-device bytes per second (read + write counted) of a large CuPy copy."""
    import cupy as cp
    src = cp.ones(nbytes // 4, cp.float32)
    dst = cp.empty_like(src)
    return 2 * src.nbytes / (median_us(lambda: cp.copyto(dst, src), repeat=20) * 1e-6)


def _torch_refs(xt: Any, k: int, p: float, m: float, t: float, u: Any) -> dict[str, Callable[[], Any]]:
    """The sort-based way a framework does each op (the torch reference)."""
    import torch

    def scatter(vals: Any, idx: Any, keep: Any) -> Any:
        return torch.full_like(xt, -float("inf")).scatter(1, idx, torch.where(keep, vals, -float("inf")))

    def top_k() -> Any:
        vals, idx = torch.sort(xt, dim=1, descending=True)
        return scatter(vals, idx, torch.arange(xt.shape[1], device=xt.device) < k)

    def top_p() -> Any:
        vals, idx = torch.sort(xt, dim=1, descending=True)
        probs = torch.softmax(vals, dim=1)
        return scatter(vals, idx, (torch.cumsum(probs, dim=1) - probs) < p)

    def dist() -> Any:
        cum = torch.cumsum(torch.softmax(xt, dim=1), dim=1, dtype=torch.float64)
        return torch.searchsorted(cum, (u * cum[:, -1])[:, None])

    def chain() -> Any:
        vals, idx = torch.sort(xt, dim=1, descending=True)
        v = vals[:, :k]
        probs = torch.softmax(v, dim=1)
        keep = ((torch.cumsum(probs, dim=1) - probs) < p) & (v >= v[:, :1] + float(np.log(m)))
        w = torch.softmax(torch.where(keep, v / t, -float("inf")), dim=1)
        j = torch.searchsorted(torch.cumsum(w, dim=1, dtype=torch.float64), u[:, None]).clamp_max(k - 1)
        return idx[:, :k].gather(1, j)

    return {"softmax": lambda: torch.softmax(xt, dim=1),
            "kth_largest": lambda: torch.sort(xt, dim=1, descending=True).values[:, k - 1],
            "top_k": top_k, "top_p": top_p,
            "min_p": lambda: torch.where(xt >= xt.max(dim=1, keepdim=True).values + float(np.log(m)), xt, -float("inf")),
            "dist": dist, "chain+dist": chain}


def _ours(x: Any, k: int, p: float, m: float, t: float, u: Any) -> dict[str, Callable[[], Any]]:
    import cupy as cp

    from gpu_impl import kernels
    B, V = x.shape
    kk, pp, mm = cp.full(B, k, cp.int64), cp.full(B, p, cp.float32), cp.full(B, m, cp.float32)
    zeros = cp.zeros(B, cp.int64)
    plan = kernels.plan_chain(B, V, k, p, 0, m, 0, t)

    y_max = cp.empty(B, cp.float32)
    row_max = x.max(axis=1)  # an input: gpu_impl's validation computes it before any of these

    def chain() -> Any:
        y = kernels.chain_rows(x, None, plan, out_max=y_max)
        return kernels.dist_rows(y, y_max, u)

    return {"softmax": lambda: kernels.softmax_rows(x),
            "kth_largest": lambda: kernels.nth_largest(x, kk),
            "top_k": lambda: kernels.top_k_rows(x, kk),
            "top_p": lambda: kernels.top_p_rows(x, row_max, pp, zeros),
            "min_p": lambda: kernels.min_p_rows(x, row_max, mm, zeros),
            "dist": lambda: kernels.dist_rows(x, row_max, u),
            "chain+dist": chain}


# bytes each op must move: read the logits once; write a [B, V] output once where it has one
_WRITES = {"softmax": 1, "kth_largest": 0, "top_k": 1, "top_p": 1, "min_p": 1, "dist": 0, "chain+dist": 0}


def graph_us(fn: Callable[[], Any]) -> float:
    """Median time of ``fn`` replayed from a CUDA graph (captured after a warm-up call)."""
    import cupy as cp
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        fn()
        stream.begin_capture()
        fn()
        graph = stream.end_capture()
        return median_us(lambda: graph.launch(stream), repeat=50)


def time_ops(B: int, V: int, bandwidth: float, with_torch: bool = True, seed: int = 0) -> list[Timing]:
    import cupy as cp
    x = cp.asarray(normal_rows(B, V, seed))
    u = cp.asarray(per_row([0.1, 0.37, 0.5, 0.73, 0.9, 0.99], B))
    ours = _ours(x, DEFAULT["k"], DEFAULT["p"], DEFAULT["m"], DEFAULT["t"], u)
    refs = {}
    if with_torch:
        import torch
        refs = _torch_refs(torch.from_dlpack(x), DEFAULT["k"], DEFAULT["p"], DEFAULT["m"], DEFAULT["t"],
                           torch.from_dlpack(u))
    out = []
    for op, fn in ours.items():
        nbytes = x.nbytes * (1 + _WRITES[op])
        ref = median_us(refs[op]) if op in refs else None
        out.append(Timing(op, f"{B}x{V}", median_us(fn), ref, nbytes / bandwidth * 1e6, nbytes))
    chain = ours["chain+dist"]
    nbytes = x.nbytes
    out.append(Timing("chain+dist (graph)", f"{B}x{V}", graph_us(chain), out[-1].torch_us,
                      nbytes / bandwidth * 1e6, nbytes))
    # where the chain's time goes: its stages alone (no reference); the row max that gpu_impl's
    # validation computes, ours and CuPy's reduction
    from gpu_impl.kernels import row_max
    from gpu_impl.kernels.filters import mask_prefix
    from gpu_impl.kernels.select import empty_prefix, nth_element
    kk = cp.full(B, DEFAULT["k"], cp.int64)
    keep = empty_prefix(cp, B)
    nth_element(x, kk, None, keep)

    def select() -> None:
        nth_element(x, kk, None, empty_prefix(cp, B))
    for name, us, nb in (("stage: radix select k=40", median_us(select), x.nbytes),
                         ("stage: radix select (graph)", graph_us(select), x.nbytes),
                         ("stage: prefix mask", median_us(lambda: mask_prefix(x, keep)), 2 * x.nbytes),
                         ("stage: row max", median_us(lambda: row_max(x)), x.nbytes),
                         ("stage: CuPy row max", median_us(lambda: x.max(axis=1)), x.nbytes)):
        out.append(Timing(name, f"{B}x{V}", us, None, nb / bandwidth * 1e6, nb))
    return out


PUBLIC = ("chain then dist", "llama_cpp_chain_dist", "top_p")


def public_us(B: int, V: int) -> dict[str, float]:
    """The validated public calls as a user makes them (same parameters every call, the logits and
    uniforms handed over on the device): replayed from their graphs (gpu_impl._graphs, the default)
    and eager (``LOGITCHECK_GRAPHS=0``: every kernel launched from Python, the checks read once)."""
    import os

    import cupy as cp

    import gpu_impl
    from gpu_impl.engines import llama_cpp_chain, llama_cpp_chain_dist
    x = cp.asarray(normal_rows(B, V))
    u = cp.asarray(per_row([0.1, 0.5, 0.9], B))
    hist = cp.full((B, 1), -1, cp.int64)
    k, p, m, t = DEFAULT["k"], DEFAULT["p"], DEFAULT["m"], DEFAULT["t"]
    calls = {"chain then dist": lambda: gpu_impl.dist(llama_cpp_chain(x, hist, 0, 1.0, 0.0, 0.0, k, p, m, t), u),
             "llama_cpp_chain_dist": lambda: llama_cpp_chain_dist(x, hist, 0, 1.0, 0.0, 0.0, k, p, m, t, u),
             "top_p": lambda: gpu_impl.top_p(x, p, 0)}
    out = {}
    for name, fn in calls.items():
        out[name] = median_us(fn, repeat=20)
        os.environ["LOGITCHECK_GRAPHS"] = "0"
        try:
            out[f"{name} (eager)"] = median_us(fn, repeat=20)
        finally:
            del os.environ["LOGITCHECK_GRAPHS"]
    return out


def run_all(shapes: tuple[tuple[int, int], ...] = ((64, 262144), (1, 262144))) -> dict[str, Any]:
    import cupy as cp
    bw = copy_bandwidth()
    rows = []
    for B, V in shapes:
        rows += [t.row() for t in time_ops(B, V, bw)]
    from gpu_impl import _graphs
    public = {f"{B}x{V}": {n: round(v, 1) for n, v in public_us(B, V).items()} for B, V in shapes}
    props = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)
    return {"device": props["name"].decode() if isinstance(props["name"], bytes) else str(props["name"]),
            "copy_bandwidth_GBps": round(bw / 1e9, 1), "timings": rows, "public_us": public,
            "public_chain_us": {shape: times["chain then dist"] for shape, times in public.items()},
            # whether the public calls above were replayed, and why a capture was refused
            "graph_stats": dict(vars(_graphs.STATS))}


def table(result: dict[str, Any]) -> str:
    lines = [f"device: {result['device']}, device-to-device copy {result['copy_bandwidth_GBps']} GB/s (read + write)",
             f"{'op':22s} {'shape':12s} {'ours us':>9s} {'torch us':>9s} {'floor us':>9s} {'x torch':>8s} {'x floor':>8s}"]
    for r in result["timings"]:
        torch_us = f"{r['torch_us']:9.1f}" if r["torch_us"] else f"{'-':>9s}"
        vs_t = f"{r['vs_torch']:8.2f}" if r["vs_torch"] else f"{'-':>8s}"
        lines.append(f"{r['op']:22s} {r['shape']:12s} {r['ours_us']:9.1f} {torch_us} {r['floor_us']:9.1f} {vs_t} "
                     f"{r['vs_floor']:8.2f}")
    if "graph_stats" in result:
        lines.append(f"graph replay of the public calls: {result['graph_stats']}")
    for shape, times in result.get("public_us", {}).items():
        lines.append(f"public calls {shape} (validated; replayed from graphs / eager), us: "
                     + ", ".join(f"{n} {times[n]} / {times[n + ' (eager)']}" for n in PUBLIC))
    return "\n".join(lines)
