"""Agreement cases of gpu_impl's CuPy kernels, each a function of the array module ``cp`` (CuPy
on a device: test_kernels.py; the emulator's stand-in on the CPU: test_kernels_emulated.py) and
its grid (``case``): every entry point compiles and runs, exact results (order statistics, top_k)
are bit-identical to the NumPy path, rounded ones sit inside the oracle's bracket, the fused chain
equals the unfused NumPy chain wherever no float decision is within its error model, and a chain
replays from a CUDA graph (so it has no host synchronisation)."""
from __future__ import annotations

import numpy as np
import pytest

import gpu_impl as g
from gpu_impl.engines import llama_cpp_chain
from properties.backends import load_impl
from properties.samplers.records import RECORDS_BY_NAME
from properties.samplers.checks import check_matches_oracle
from properties.numerics import U32, mass_allowance
from properties.measure import softmax_error
from properties.gpu.device_cases import case, FAMILIES, SHAPES, normal_rows, per_row, rows
from properties.samplers.strategies import Case

SMALL = [s for s in SHAPES if s[0] * s[1] <= 200_000]


@case()
def every_entry_point_compiles_and_loads(cp):
    from gpu_impl.kernels import ENTRY_POINTS
    from gpu_impl.kernels._build import fn
    assert all(fn(name) is not None for name in ENTRY_POINTS)


@case(shape=SHAPES)
@case(family=FAMILIES)
def nth_largest_is_the_sorted_value(cp, family, shape):
    from gpu_impl.kernels import nth_largest
    x = rows(family, shape)
    B, V = shape
    n = per_row([1, 2, 40, V // 2 + 1, V, 1024], B, np.int64).clip(1, V)
    got = nth_largest(cp.asarray(x), cp.asarray(n)).get()
    want = np.sort(x, axis=1)[:, ::-1][np.arange(B), n - 1]
    np.testing.assert_array_equal(got, want)


@case(shape=SHAPES)
@case(family=FAMILIES)
def top_k_bit_identical_to_numpy(cp, family, shape):
    x = rows(family, shape)
    B, V = shape
    k = per_row([1, 40, 0, V - 1, 2, V + 3, -1, 1025], B, np.int64)
    np.testing.assert_array_equal(g.top_k(cp.asarray(x), cp.asarray(k)).get(), g.top_k(x, k))


@case(shape=SHAPES)
@case(family=FAMILIES)
def softmax_within_error_model(cp, family, shape):
    x = rows(family, shape)
    p = g.softmax(cp.asarray(x)).get()
    for b in range(shape[0]):
        if np.isfinite(x[b]).any():
            rep = softmax_error(p[b], x[b].astype(np.float64))
            assert rep.ok, f"row {b}: {rep.describe()}"
        else:
            assert (p[b] == 0).all()


_PARAMS = {
    "top_k": lambda B, V: {"k": per_row([1, 40, 0, V - 1, 1025], B, np.int64)},
    "top_p": lambda B, V: {"p": per_row([0.95, 0.0, 0.5, 0.999, 1.0, 0.9], B, np.float32),
                           "min_keep": per_row([0, 1, 3, 0, 0, 1500], B, np.int64)},
    "min_p": lambda B, V: {"p": per_row([0.05, 0.5, 1.0, 1e-6, 0.0, 0.2], B, np.float32),
                           "min_keep": per_row([0, 3, 0, 1, 0, 1100], B, np.int64)},
    "dist": lambda B, V: {"u": per_row([0.0, 0.3, 0.999999, 0.5, 0.7], B)},
    "greedy": lambda B, V: {},
}


@case(shape=SMALL)
@case(family=FAMILIES)
@case(name=sorted(_PARAMS))
def kernel_paths_inside_the_oracle_bracket(cp, name, family, shape):
    record = RECORDS_BY_NAME[name]
    x = rows(family, shape)
    if name in ("dist", "greedy") and not np.isfinite(x).any(axis=1).all():
        pytest.skip("selection needs a finite logit in every row")
    case = Case(family, shape[1], "float32", tuple(range(shape[0])), _PARAMS[name](*shape), x)
    check_matches_oracle(load_impl("gpu_impl", "cupy"), record, case)


def _chain_params(B: int, V: int) -> dict:
    return dict(k=per_row([40, 0, 1, 1024, 40, 7], B, np.int64), p=per_row([0.95, 0.9, 1.0, 0.5, 0.0, 0.95], B),
                m=per_row([0.05, 0.0, 0.1, 0.05, 0.5, 2.0], B), t=per_row([0.8, 1.0, 0.0, 1.5, -1.0, 0.7], B))


def _ambiguous(row: np.ndarray, k: int, p: float, m: float) -> bool:
    """Does a float decision of the chain sit within its error model on this row (then the
    fused and unfused chains may legally differ)? top_p: a cumulative mass within the allowance
    of p; min_p: a logit within the threshold's rounding of max + ln m."""
    fin = np.sort(row[np.isfinite(row)].astype(np.float64))[::-1]
    if fin.size == 0:
        return False
    n = fin.size if k <= 0 or k >= row.size else min(k, fin.size)
    top = fin[:n]
    if p < 1:
        e = np.exp(top - top[0])
        cum = np.cumsum(e) / e.sum()
        if (np.abs(cum - p) <= mass_allowance(n, row.size)).any():
            return True
    if m > 0:
        thr = top[0] + np.log(m)
        if (np.abs(top - thr) <= 4 * U32 * (abs(top[0]) + abs(np.log(m)) + 1)).any():
            return True
    return False


@case(shape=[(64, 262144), (6, 1000), (6, 4099), (3, 7)])
@case(family=["normal", "flat", "plateaus", "neg_inf", "near_ties"])
def fused_chain_equals_unfused_numpy_chain(cp, family, shape):
    B, V = shape
    x = normal_rows(B, V) if family == "normal" else rows(family, shape)
    prm = _chain_params(B, V)
    args = (np.full((B, 1), -1), 0, 1.0, 0.0, 0.0)
    want = llama_cpp_chain(x, *args, prm["k"], prm["p"], prm["m"], prm["t"])
    got = llama_cpp_chain(cp.asarray(x), *args, *(cp.asarray(prm[n]) for n in "kpmt")).get()
    from gpu_impl import kernels  # the kernel entry point, with the output max dist reads
    plan = kernels.plan_chain(B, V, prm["k"], prm["p"].astype(np.float32), 0, prm["m"].astype(np.float32), 0,
                              prm["t"].astype(np.float32))
    y_max = cp.empty(B, cp.float32)
    y = kernels.chain_rows(cp.asarray(x), None, plan, out_max=y_max)
    np.testing.assert_array_equal(y.get(), got)
    np.testing.assert_array_equal(y_max.get(), y.max(axis=1).get())
    for b in range(B):
        if not _ambiguous(x[b], int(prm["k"][b]), float(prm["p"][b]), float(prm["m"][b])):
            np.testing.assert_array_equal(got[b], want[b], err_msg=f"row {b}, params { {n: prm[n][b] for n in prm} }")


@case()
def chain_and_dist_replay_from_a_cuda_graph(cp):
    """No host synchronisation inside the fused chain and dist: both capture into a CUDA graph,
    and the replay gives the eager result bit for bit."""
    from gpu_impl import kernels
    B, V = 8, 32768
    x = cp.asarray(normal_rows(B, V, seed=3))
    plan = kernels.plan_chain(B, V, 40, 0.95, 0, 0.05, 0, 0.8)
    row_max = x.max(axis=1)
    u = cp.asarray(per_row([0.1, 0.5, 0.9, 0.99], B))

    y_max = cp.empty(B, cp.float32)

    def sample():
        y = kernels.chain_rows(x, row_max, plan, out_max=y_max)
        if not stream.is_capturing():  # the chain's own output max is the output's max, bit for bit
            np.testing.assert_array_equal(y_max.get(), y.max(axis=1).get())
        return kernels.dist_rows(y, y_max, u)
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        eager = sample()  # also compiles the kernels and warms the memory pool
        stream.begin_capture()
        ids = sample()
        graph = stream.end_capture()
        graph.launch()
    stream.synchronize()
    np.testing.assert_array_equal(ids.get(), eager.get())


def _public_calls(cp, B: int, V: int) -> dict:
    """Each replayed public call, as a decode loop makes it: the same parameters every call,
    fresh logits and uniforms (history and uniforms handed over on the device or the host)."""
    from gpu_impl.engines import llama_cpp_chain_dist
    hist = cp.full((B, 2), -1, cp.int64)
    chain = (0, 1.0, 0.0, 0.0, per_row([40, 0, 5], B, np.int64), 0.95, per_row([0.05, 0.0], B), 0.8)
    return {"llama_cpp_chain_dist (device u)": lambda x, u: llama_cpp_chain_dist(x, hist, *chain, cp.asarray(u)),
            "llama_cpp_chain_dist (host u)": lambda x, u: llama_cpp_chain_dist(x, hist, *chain, u),
            "llama_cpp_chain": lambda x, u: llama_cpp_chain(x, hist, *chain),
            "dist": lambda x, u: g.dist(x, u),
            "top_k": lambda x, u: g.top_k(x, per_row([40, 1, 0], B, np.int64)),
            "top_p": lambda x, u: g.top_p(x, 0.9, 1),
            "min_p": lambda x, u: g.min_p(x, per_row([0.05, 1e-45, 2.0], B), 1)}


@case(shape=[(3, 1000), (2, 262144), (64, 8192)])
@case(name=["llama_cpp_chain_dist (device u)", "llama_cpp_chain_dist (host u)", "llama_cpp_chain", "dist", "top_k",
            "top_p", "min_p"])
def public_calls_replayed_from_a_graph_equal_eager(cp, name, shape, monkeypatch):
    """gpu_impl._graphs on the device: the call is captured on its second sighting and every later
    call, new logits each time, is a replay whose result equals the eager call's bit for bit;
    NaN logits after the capture raise the eager error. A refused capture fails here with its
    reason (the CPU tests use a stand-in graph)."""
    from gpu_impl import _graphs
    monkeypatch.setattr(_graphs, "STATS", _graphs.Stats())
    _graphs.clear()
    B, V = shape
    call = _public_calls(cp, B, V)[name]
    xs = [cp.asarray(normal_rows(B, V, seed=s)) for s in range(6)]
    us = [per_row([0.1, 0.5, 0.9, 0.99], B)[::-1 if s % 2 else 1].copy() for s in range(6)]
    got = [cp.asnumpy(call(x, u)) for x, u in zip(xs, us)]
    assert _graphs.STATS.refused == {} and _graphs.STATS.captures == 1, vars(_graphs.STATS)
    assert _graphs.STATS.replays == 4, vars(_graphs.STATS)
    monkeypatch.setenv("LOGITCHECK_GRAPHS", "0")
    for i, (x, u) in enumerate(zip(xs, us)):
        np.testing.assert_array_equal(got[i], cp.asnumpy(call(x, u)), err_msg=f"call {i}")
    monkeypatch.delenv("LOGITCHECK_GRAPHS")
    bad = xs[0].copy()
    bad[B - 1, V // 2] = cp.nan
    with pytest.raises(ValueError, match=rf"logits rows \[{B - 1}\] contain NaN or \+inf"):
        call(bad, us[0])
    _graphs.clear()


@case(shape=[(2, 262144), (64, 8192)])
@case(name=["llama_cpp_chain_dist (device u)", "llama_cpp_chain", "dist", "top_p"])
def public_calls_read_in_place_equal_eager(cp, name, shape, monkeypatch):
    """The in-place graphs (logits of 1 MiB or more at the same address twice): one logits buffer
    rewritten before every call, as a decode loop's output buffer is; after two eager calls and
    two replays from copies, replays read it in place and equal the eager results bit for bit."""
    from gpu_impl import _graphs
    monkeypatch.setattr(_graphs, "STATS", _graphs.Stats())
    _graphs.clear()
    B, V = shape
    call = _public_calls(cp, B, V)[name]
    x = cp.empty((B, V), cp.float32)
    data = [cp.asarray(normal_rows(B, V, seed=s)) for s in range(7)]
    u = per_row([0.1, 0.5, 0.9, 0.99], B)
    got = []
    for d in data:
        x[...] = d
        got.append(cp.asnumpy(call(x, u)))
    assert _graphs.STATS.refused == {} and (_graphs.STATS.captures, _graphs.STATS.in_place) == (2, 3), vars(_graphs.STATS)
    monkeypatch.setenv("LOGITCHECK_GRAPHS", "0")
    for i, d in enumerate(data):
        np.testing.assert_array_equal(got[i], cp.asnumpy(call(d, u)), err_msg=f"call {i}")
    _graphs.clear()
