"""The device tests of gpu_impl's kernels (test_kernels.py, test_kernels_paths.py), run on the CPU:
the kernels emulated from their own CUDA source (properties/gpu/emulator), CuPy stood in by NumPy,
a CUDA graph by the stand-in graph that refuses device reads and uploads while it captures or
replays. What only a device shows stays with the device run: timing, the device's rounding
(fused multiply-add, expf), CuPy's own kernels, a real stream capture (those tests skip here).
Same cases as on a device; under ci not the largest shapes (B x V above ``MAX_ELEMENTS``)."""
from __future__ import annotations

import inspect
import itertools
from typing import Any, Iterator

import pytest

from properties.gpu import test_kernels, test_kernels_paths
from properties.gpu.emulator.cupy_standin import GraphsNotEmulated, emulated_device
from properties.gpu.emulator.launch import unavailable_reason
from properties.profiles import current_profile

REASON = unavailable_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"the kernel emulator: {REASON}")
# ci keeps (2, 262144) (the float4 path at the largest vocabulary) and leaves 64 x 262,144 (the
# benchmark's batch: 13 s a case here) to the nightly
MAX_ELEMENTS = 1 << 25 if current_profile() == "nightly" else 600_000


def _params(fn: Any) -> list[dict[str, Any]]:
    """Every combination of ``fn``'s parametrize marks, as keyword arguments."""
    axes = []
    for mark in getattr(fn, "pytestmark", []):
        if mark.name != "parametrize":
            continue
        names = [n.strip() for n in mark.args[0].split(",")] if isinstance(mark.args[0], str) else list(mark.args[0])
        axes.append([dict(zip(names, v.values if hasattr(v, "values") else (v,) if len(names) == 1 else v))
                     for v in mark.args[1]])
    return [{k: v for d in combo for k, v in d.items()} for combo in itertools.product(*axes)]


def _cases() -> Iterator[Any]:
    for module in (test_kernels, test_kernels_paths):
        for name, fn in vars(module).items():
            if not name.startswith("test_") or not inspect.isfunction(fn):
                continue
            for kw in _params(fn):
                shape = kw.get("shape", (1, 1))
                if shape[0] * shape[1] > MAX_ELEMENTS:
                    continue
                label = "-".join(str(v) for v in kw.values())
                yield pytest.param(module, name, kw, id=f"{module.__name__.rsplit('.', 1)[1]}::{name}[{label}]")


@pytest.mark.parametrize("module, name, kw", list(_cases()))
def test_device_test_on_emulated_kernels(module, name, kw, monkeypatch):
    cp = emulated_device(monkeypatch)
    monkeypatch.setattr(module, "cp", cp)
    fn = getattr(module, name)
    if "monkeypatch" in inspect.signature(fn).parameters:
        kw = {**kw, "monkeypatch": monkeypatch}
    try:
        fn(**kw)
    except GraphsNotEmulated as e:
        pytest.skip(str(e))
