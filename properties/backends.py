"""The implementation under test, on a chosen array backend.

``--impl MODULE`` names any module with gpu_impl's API; ``--backend numpy|cupy`` says where its
arrays live. Tests hand it NumPy arrays and get NumPy arrays back; this adapter moves them.
A function the module lacks is "not covered": the test that needs it is skipped with that
reason and listed in the run's summary, never passed.
"""
from __future__ import annotations

import importlib
from types import ModuleType
from typing import Any, Callable

import numpy as np

NOT_COVERED: set[str] = set()


class NotCovered(Exception):
    """The implementation module has no function of this name."""


def cupy_or_none() -> ModuleType | None:
    try:
        import cupy
    except Exception:  # ImportError, or a CUDA runtime that fails to load
        return None
    return cupy


def cupy_device_reason() -> str | None:
    """None if a CUDA device is usable, else why not."""
    cp = cupy_or_none()
    if cp is None:
        return "cupy is not installed (pip install 'logitcheck[gpu]')"
    try:
        if not cp.is_available():
            return "cupy is installed but no CUDA device is available"
    except Exception as exc:  # pragma: no cover - driver errors
        return f"cupy cannot reach a CUDA device: {exc}"
    return None


class Impl:
    """Calls ``module.name(*args)`` with arrays moved to the backend and results moved back."""

    def __init__(self, module: ModuleType, backend: str) -> None:
        self.module, self.backend = module, backend
        self.xp = cupy_or_none() if backend == "cupy" else np
        if self.xp is None:
            raise RuntimeError("backend cupy requested but cupy cannot be imported")

    @property
    def name(self) -> str:
        return self.module.__name__

    def has(self, fn: str) -> bool:
        return callable(getattr(self.module, fn, None))

    def function(self, fn: str) -> Callable[..., Any]:
        f = getattr(self.module, fn, None)
        if not callable(f):
            NOT_COVERED.add(f"{self.name}.{fn}")
            raise NotCovered(f"{fn} is not implemented in {self.name}")
        return f

    def to_device(self, x: Any) -> Any:
        if not isinstance(x, np.ndarray) or self.backend == "numpy":
            return x
        if x.dtype.name == "bfloat16":  # CuPy has no bfloat16: ship the raw bits
            x = x.view(np.uint16)
        return self.xp.asarray(x)

    def to_host(self, x: Any) -> Any:
        if isinstance(x, tuple):
            return tuple(self.to_host(v) for v in x)
        if self.backend == "cupy" and hasattr(x, "get"):
            return x.get()
        return np.asarray(x) if hasattr(x, "__array__") else x

    def __call__(self, fn: str, *args: Any, **kwargs: Any) -> Any:
        f = self.function(fn)
        out = f(*(self.to_device(a) for a in args), **{k: self.to_device(v) for k, v in kwargs.items()})
        return self.to_host(out)


def load_impl(module_name: str, backend: str, module: ModuleType | None = None) -> Impl:
    return Impl(module if module is not None else importlib.import_module(module_name), backend)
