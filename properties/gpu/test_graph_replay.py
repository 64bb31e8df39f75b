"""Public calls replayed from a graph (``gpu_impl._graphs``), their orchestration on the CPU: NumPy
stands in for CuPy and for the graph (``properties.gpu.standin``: a capture runs the call with
device reads refused, a launch reruns it into the captured arrays). What a replay returns is what
the eager call returns, for new data every call; a failing check gives the eager call's own
error; what cannot be a graph stays eager. The graphs themselves are judged on a device
(test_kernels.py, test_backend_cupy.py)."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import gpu_impl
from gpu_impl import _deferred, _graphs
from gpu_impl.engines import llama_cpp_chain, llama_cpp_chain_dist
from properties.gpu.standin import Device, FakeGraphs, device_rows, stand_in_kernels

B, V = 3, 64
RNG = np.random.default_rng(5)
PARAMS = (0, 1.0, 0.0, 0.0, 40, 0.95, 0.05, 0.8)  # last_n, repeat, freq, present, k, p, m, t


def rows(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).normal(0, 3, (B, V)).astype(np.float32)


@pytest.fixture
def graphs(monkeypatch: pytest.MonkeyPatch) -> FakeGraphs:
    fake = FakeGraphs()
    monkeypatch.setattr(_graphs, "BACKEND", fake)
    monkeypatch.setattr(_graphs, "STATS", _graphs.Stats())
    monkeypatch.delenv("LOGITCHECK_GRAPHS", raising=False)
    device_rows(monkeypatch)
    stand_in_kernels(monkeypatch)
    _graphs.clear()
    yield fake
    _graphs.clear()


def history() -> Any:
    return np.full((B, 1), -1).view(Device)


def chain_dist(x: np.ndarray, u: Any) -> Any:
    return llama_cpp_chain_dist(x.view(Device), history(), *PARAMS, u)


def want_ids(x: np.ndarray, u: Any) -> np.ndarray:
    return gpu_impl.dist(llama_cpp_chain(x, np.full((B, 1), -1), *PARAMS), np.asarray(u))


@pytest.mark.parametrize("same_array", [False, True], ids=["new arrays", "one array rewritten"])
def test_replay_gives_the_eager_result_for_new_data(graphs: FakeGraphs, same_array: bool) -> None:
    """Captured the second time a key is seen; later calls, new logits and new uniforms each time
    (in new arrays, or written into the same one), are replayed and return what the NumPy path
    returns."""
    x, h = rows(0).view(Device), history()
    for i in range(8):
        data, u = rows(i), RNG.random(B)
        if same_array:
            x[...] = data
        got = llama_cpp_chain_dist(x if same_array else data.view(Device), h if same_array else history(), *PARAMS, u)
        np.testing.assert_array_equal(np.asarray(got), want_ids(data, u))
    assert (graphs.captures, _graphs.STATS.captures, _graphs.STATS.replays) == (1, 1, 6)
    assert graphs.launches == 7  # the capture's check against the eager result, then 6 replays


def test_penalties_replayed(graphs: FakeGraphs, monkeypatch: pytest.MonkeyPatch) -> None:
    """The chain with its penalties on (history on the device, its ids changing every call): the
    penalty parameters are uploaded once, so the call is a graph, and its replays equal the NumPy
    path."""
    cupyx = pytest.importorskip("cupyx")
    monkeypatch.setattr(cupyx, "scatter_add", np.add.at)
    pen = (3, 1.1, 0.1, 0.1, 40, 0.95, 0.05, 0.8)
    for i in range(5):
        data, u = rows(i), RNG.random(B)
        h = np.random.default_rng(i).integers(-1, V, (B, 4))
        got = llama_cpp_chain_dist(data.view(Device), h.view(Device), *pen, u)
        np.testing.assert_array_equal(np.asarray(got), gpu_impl.dist(llama_cpp_chain(data, h, *pen), u))
    assert (_graphs.STATS.captures, _graphs.STATS.replays, _graphs.STATS.refused) == (1, 3, {})


def test_large_arrays_at_the_same_address_are_read_in_place(graphs: FakeGraphs,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Arrays at the same addresses twice get a graph that reads them where they are (no copy in):
    eager, eager + capture, replay from copies (+ a first sighting of the addresses), replay from
    copies + capture of the in-place graph, then in-place replays, each on the arrays' new
    content; a NaN written there still gives the eager error."""
    monkeypatch.setattr(_graphs, "IN_PLACE_BYTES", 0)
    x, h = rows(0).view(Device), history()
    for i in range(7):
        data, u = rows(i), RNG.random(B)
        x[...] = data
        np.testing.assert_array_equal(np.asarray(llama_cpp_chain_dist(x, h, *PARAMS, u)), want_ids(data, u))
    assert (graphs.captures, _graphs.STATS.replays, _graphs.STATS.in_place) == (2, 5, 3)
    x[...] = NAN
    with pytest.raises(ValueError, match=r"logits rows \[1\] contain NaN or \+inf"):
        llama_cpp_chain_dist(x, h, *PARAMS, RNG.random(B))


def test_replay_returns_copies(graphs: FakeGraphs) -> None:
    """A replay's result is not the graph's buffer: the next replay leaves it as it was."""
    for i in range(2):
        llama_cpp_chain(rows(i).view(Device), history(), *PARAMS)
    a = llama_cpp_chain(rows(2).view(Device), history(), *PARAMS)
    kept = np.array(a)
    llama_cpp_chain(rows(3).view(Device), history(), *PARAMS)
    assert _graphs.STATS.replays == 2
    np.testing.assert_array_equal(np.asarray(a), kept)
    np.testing.assert_array_equal(kept, llama_cpp_chain(rows(2), np.full((B, 1), -1), *PARAMS))


NAN = rows(9)
NAN[1, 3] = np.nan


@pytest.mark.parametrize("x, u, message", [
    (NAN, np.array([0.1, 0.5, 0.9]), r"logits rows \[1\] contain NaN or \+inf"),
    (rows(9), np.array([0.1, 1.5, 0.9]), r"parameter u must lie in \[0, 1\], got \[0.1, 1.5, 0.9\]"),
    (rows(9), np.array([0.1, 1.5, 0.9]).view(Device), r"parameter u must lie in \[0, 1\], got \[0.1, 1.5, 0.9\]"),
    (np.full((B, V), 3e38, np.float32), np.array([0.1, 0.5, 0.9]), r"logits rows \[0, 1, 2\] contain NaN or \+inf"),
], ids=["NaN logits", "host u out of range", "device u out of range", "overflow after t"])
def test_a_failing_check_gives_the_eager_error(graphs: FakeGraphs, x: np.ndarray, u: Any, message: str) -> None:
    """After capture, a call whose checks fail raises the eager call's error (the replay's flag
    sends it to the eager call; a host uniform it cannot take never reaches the graph)."""
    good_u = np.array([0.2, 0.4, 0.6]).view(Device) if isinstance(u, Device) else np.array([0.2, 0.4, 0.6])
    for i in range(2):
        chain_dist(rows(i), good_u)
    assert _graphs.STATS.captures == 1
    with pytest.raises(ValueError, match=message):
        chain_dist(x, u)
    np.testing.assert_array_equal(np.asarray(chain_dist(rows(5), good_u)), want_ids(rows(5), good_u))


def test_one_read_per_replayed_call(graphs: FakeGraphs, monkeypatch: pytest.MonkeyPatch) -> None:
    counted: list[int] = []
    real = _deferred.read_flags
    monkeypatch.setattr(_deferred, "read_flags", lambda flags: (counted.append(len(flags)), real(flags))[1])
    for i in range(2):
        chain_dist(rows(i), RNG.random(B))
    counted.clear()
    chain_dist(rows(3), RNG.random(B))
    assert counted == [1] and _graphs.STATS.replays == 1


def test_a_new_key_runs_eagerly(graphs: FakeGraphs) -> None:
    """Other host parameters, another shape or dtype: another key, eager until seen twice; a
    key seen once is never captured."""
    u = np.array([0.3, 0.6, 0.9])
    chain_dist(rows(0), u)
    got = llama_cpp_chain_dist(rows(1).view(Device), history(), 0, 1.0, 0.0, 0.0, 20, 0.9, 0.05, 0.7, u)
    want = gpu_impl.dist(llama_cpp_chain(rows(1), np.full((B, 1), -1), 0, 1.0, 0.0, 0.0, 20, 0.9, 0.05, 0.7), u)
    np.testing.assert_array_equal(np.asarray(got), want)
    llama_cpp_chain_dist(rows(1).astype(np.float16).view(Device), history(), *PARAMS, u)
    assert (graphs.captures, _graphs.STATS.replays, _graphs.STATS.eager) == (0, 0, 3)


def test_nested_calls_are_not_replayed_on_their_own(graphs: FakeGraphs) -> None:
    """The chain's filters join the chain's checks: only the outer call is captured."""
    for i in range(3):
        llama_cpp_chain(rows(i).view(Device), history(), *PARAMS)
    assert list(_graphs._GRAPHS) and all(k[0] == "llama_cpp_chain" for k in _graphs._GRAPHS)


@_graphs.replayed()
@_deferred.validated
def _reads_the_device(logits: Any) -> Any:
    return logits * float(np.asarray(logits.get()).max())  # a host decision on device data


_SHIFT = [0.0]


@_graphs.replayed()
@_deferred.validated
def _host_state(logits: Any) -> Any:
    _SHIFT[0] += 1.0  # a host value outside the key, frozen into a graph
    return logits + _SHIFT[0]


@pytest.mark.parametrize("fn, reason", [(_reads_the_device, "RuntimeError"),
                                        (_host_state, "the graph's result differs from the eager call's")],
                         ids=["reads the device", "host state outside the key"])
def test_what_cannot_be_a_graph_stays_eager(graphs: FakeGraphs, fn: Any, reason: str) -> None:
    """A call that reads the device under capture, or whose graph disagrees with its eager result
    on the capturing call, is refused for good; its results stay the eager ones."""
    for i in range(4):
        x = rows(i)
        got = np.asarray(fn(x.view(Device)))
        assert got.shape == (B, V)
    assert _graphs.STATS.replays == 0 and _graphs.STATS.refused == {reason: 1}


def test_off_switch_and_lru(graphs: FakeGraphs, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOGITCHECK_GRAPHS", "0")
    for i in range(3):
        chain_dist(rows(i), RNG.random(B))
    assert graphs.captures == 0
    monkeypatch.delenv("LOGITCHECK_GRAPHS")
    monkeypatch.setattr(_graphs, "MAX_GRAPHS", 2)
    for t in (0.5, 0.6, 0.7):
        for i in range(2):
            llama_cpp_chain(rows(i).view(Device), history(), 0, 1.0, 0.0, 0.0, 40, 0.95, 0.05, t)
    assert graphs.captures == 3 and len(_graphs._GRAPHS) == 2
    assert [k[-1] for k in _graphs._GRAPHS] == [("float", 0.6), ("float", 0.7)]


def test_upload_is_kept_by_content(graphs: FakeGraphs) -> None:
    """A small host parameter is uploaded once per content, and a capture keeps what it read."""
    from properties.gpu.standin import XP
    a = _graphs.upload(XP, np.array([1, 2, 3]))
    assert _graphs.upload(XP, np.array([1, 2, 3])) is a
    assert _graphs.upload(XP, np.array([1, 2, 4])) is not a
    assert _graphs.upload(np, np.array([1, 2, 3])) is not a  # NumPy rows: nothing to keep
    keep: list[Any] = []
    token = _graphs._KEEP.set(keep)
    try:
        _graphs.upload(XP, np.array([1, 2, 3]))
    finally:
        _graphs._KEEP.reset(token)
    assert keep == [a]


_SETS = [PARAMS, (0, 1.0, 0.0, 0.0, 5, 0.5, 0.0, 1.5), (3, 1.2, 0.1, 0.0, 0, 1.0, 0.1, 0.0)]
_DATA = ["rows", "rows", "rows", "NaN row", "empty row", "u out of [0, 1]"]


def _one(kind: str, params: int, data: str, seed: int, x: Any, h: Any) -> Any:
    """One public call of a decode loop: its logits written into ``x`` (a Device array), its result
    (or its error's text)."""
    rng = np.random.default_rng(seed)
    x[...] = rows(seed)
    if data == "NaN row":
        x[seed % B, seed % V] = np.nan
    elif data == "empty row":
        x[seed % B] = -np.inf
    u = rng.random(B) * (3.0 if data == "u out of [0, 1]" else 1.0)
    h[...] = rng.integers(-1, V, h.shape)
    try:
        if kind == "chain_dist":
            out = llama_cpp_chain_dist(x, h, *_SETS[params], u)
        elif kind == "chain":
            out = llama_cpp_chain(x, h, *_SETS[params])
        elif kind == "dist":
            out = gpu_impl.dist(x, u)
        elif kind == "top_k":
            out = gpu_impl.top_k(x, [5, 0, 70][params])
        elif kind == "top_p":
            out = gpu_impl.top_p(x, [0.9, 0.5, 1.0][params], 1)
        else:
            out = gpu_impl.min_p(x, np.array([0.05, 0.5, 2.0])[[params] * B], 1)
        return np.array(out)
    except ValueError as e:
        return str(e)


@settings(max_examples=40, deadline=None)
@given(calls=st.lists(st.tuples(st.sampled_from(["chain_dist", "chain", "dist", "top_k", "top_p", "min_p"]), st.sampled_from([0, 0, 1, 2]),
                                st.sampled_from(_DATA), st.integers(0, 50), st.sampled_from([True, True, False])),
                      min_size=8, max_size=24))
def test_any_sequence_of_calls_equals_the_eager_calls(calls: list) -> None:
    """Model-based: a random decode loop (six functions, three parameter sets, bad rows and bad
    uniforms mixed in, logits in one rewritten array or a new one) gives, call by call, what the
    same calls give with replay off; errors included. Seed: Hypothesis' (the profile's)."""
    import cupyx
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(_graphs, "BACKEND", FakeGraphs())
        mp.setattr(_graphs, "STATS", _graphs.Stats())
        mp.setattr(_graphs, "IN_PLACE_BYTES", 0)
        mp.setattr(cupyx, "scatter_add", np.add.at)
        device_rows(mp)
        stand_in_kernels(mp)
        _graphs.clear()
        shared, h = np.zeros((B, V), np.float32).view(Device), np.zeros((B, 3), np.int64).view(Device)
        for kind, params, data, seed, same in calls:
            x = shared if same else np.zeros((B, V), np.float32).view(Device)
            mp.delenv("LOGITCHECK_GRAPHS", raising=False)
            got = _one(kind, params, data, seed, x, h)
            mp.setenv("LOGITCHECK_GRAPHS", "0")
            want = _one(kind, params, data, seed, x, h)
            if isinstance(want, str) or isinstance(got, str):
                assert got == want
            else:
                np.testing.assert_array_equal(got, want)
        _graphs.clear()
