"""NumPy standing in for CuPy, so that gpu_impl's device-path orchestration (validation, graph
replay) runs on a machine without a GPU: rows as device values (``Device``), NumPy as their array
module (``XP``), and the kernels of the chain + dist path replaced by NumPy code computing what
they compute (the kernels themselves are judged on a device)."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import gpu_impl
from gpu_impl import _array


class Device(np.ndarray):
    """A NumPy array that answers ``.get()``, as a CuPy array does: a value handed over on the
    device. ``READS_REFUSED`` stands in for a stream under capture, where a read raises."""
    READS_REFUSED = False

    def get(self) -> np.ndarray:
        if Device.READS_REFUSED:
            raise RuntimeError("a device read while the stream is capturing")
        return np.asarray(self)


class StandIn:
    """NumPy as the array module of CuPy rows (``is_cupy`` is true for any module but NumPy);
    ``asarray`` and ``ascontiguousarray`` keep a device value's type."""

    def __getattr__(self, name: str) -> Any:
        if name == "asarray":
            return np.asanyarray
        if name == "stack":  # flags stacked on the device stay there
            return lambda arrays, *args, **kw: np.stack(arrays, *args, **kw).view(Device)
        if name == "ascontiguousarray":
            return lambda a, *args, **kw: (np.ascontiguousarray(a, *args, **kw).view(Device)
                                           if isinstance(a, Device) else np.ascontiguousarray(a, *args, **kw))
        return getattr(np, name)


XP = StandIn()


def device_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    """``get_xp`` answers the stand-in for ``Device`` values."""
    real = _array.get_xp
    monkeypatch.setattr(_array, "get_xp", lambda x: XP if isinstance(x, Device) else real(x))


def stand_in_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """The kernel entry points of the chain + dist path and of top_k, top_p and min_p, as NumPy code."""
    import gpu_impl.kernels as kernels
    from gpu_impl.engines.llama_cpp import llama_cpp_chain as chain

    def row_max(x: Any) -> tuple[Any, Any]:
        m = np.asarray(x).max(axis=1)
        return m, np.array((~(m < np.inf)).sum(), np.uint32)

    def chain_rows(x: Any, rm: Any, plan: tuple[Any, ...], out_max: Any = None) -> Any:
        k, p, m, t = plan
        y = chain(np.asarray(x), np.full((x.shape[0], 0), -1), 0, 1.0, 0.0, 0.0, k, p, m, t)
        if out_max is not None:
            out_max[...] = y.max(axis=1)
        return y.view(Device)
    monkeypatch.setattr(kernels, "row_max", row_max)
    monkeypatch.setattr(kernels, "plan_chain", lambda B, V, k, p, mk_p, m, mk_m, t: (k, p, m, t))
    monkeypatch.setattr(kernels, "chain_rows", chain_rows)
    monkeypatch.setattr(kernels, "dist_rows",
                        lambda x, rm, u: gpu_impl.dist(np.asarray(x), np.asarray(u)).view(Device))
    monkeypatch.setattr(kernels, "top_k_rows", lambda x, k: gpu_impl.top_k(np.asarray(x), np.asarray(k)).view(Device))
    monkeypatch.setattr(kernels, "top_p_rows", lambda x, rm, p, mk: gpu_impl.top_p(np.asarray(x), np.asarray(p),
                                                                                   np.asarray(mk)).view(Device))
    monkeypatch.setattr(kernels, "min_p_rows", lambda x, rm, p, mk, short=True: gpu_impl.min_p(
        np.asarray(x), np.asarray(p), np.asarray(mk)).view(Device))


class FakeGraph:
    """A captured call: each launch reruns it and writes its results into the arrays the capture
    returned, as a CUDA graph writes the same addresses every replay."""

    def __init__(self, body: Any, out: Any) -> None:
        self.body, self.out = body, out

    def launch(self) -> None:
        Device.READS_REFUSED = True
        try:
            new = self.body()
        finally:
            Device.READS_REFUSED = False
        for old, got in zip(_arrays(self.out), _arrays(new)):
            np.copyto(old, got)


def _arrays(out: Any) -> list[Any]:
    if out is None:
        return []
    if isinstance(out, tuple):
        return [a for o in out for a in _arrays(o)]
    return [out]


class FakeGraphs:
    """``gpu_impl._graphs.BACKEND`` on NumPy: a capture runs the call once with device reads
    refused (a read under capture raises on CuPy), and counts what it did."""

    def __init__(self) -> None:
        self.captures = self.launches = 0
        self.now = False

    def device(self) -> int:
        return 0

    def stream(self) -> int:
        return 0

    def capturing(self) -> bool:
        return self.now

    def capture(self, body: Any) -> tuple[Any, Any, Any]:
        self.now, Device.READS_REFUSED = True, True
        try:
            out = body()
        finally:
            self.now, Device.READS_REFUSED = False, False
        self.captures += 1
        return FakeGraph(body, out), out, None

    def launch(self, graph: FakeGraph) -> None:
        self.launches += 1
        graph.launch()
