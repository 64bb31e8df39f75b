"""The implementation under test, on a chosen array backend.

``--impl MODULE`` names any module with gpu_impl's API; ``--backend numpy|cupy|emulated`` says where its
arrays live. Tests hand it NumPy arrays and get NumPy arrays back; this adapter moves them.
A function the module lacks is "not covered": the test that needs it is skipped with that
reason and listed in the run's summary, never passed.
"""
from __future__ import annotations

import functools
import importlib
import os
from types import ModuleType
from typing import Any, Callable

import numpy as np

BACKENDS = ("numpy", "cupy", "emulated")
"""``--backend``: NumPy; CuPy on a CUDA device; or gpu_impl's device path with its kernels emulated
on the CPU from their CUDA source (``properties/gpu/emulator``)."""
NOT_COVERED: set[str] = set()
CALLED: set[str] = set()
"""Qualified names (``engines.hf_top_k``) of the judged functions some test called in this process."""
CALL_LOG_ENV = "LOGITCHECK_CALL_LOG"
"""When set, a path: every call through ``Impl`` appends one JSON line (the test, the function's
qualified name, a fingerprint of each argument), read by the coverage-by-argument meta test."""
_PARTS = ("ops", "quants", "engines")


class NotCovered(Exception):
    """The implementation module has no function of this name."""


class CaseNotCarried(NotCovered):
    """A case the harness protocol has no way to send (e.g. complex logits): NOT COVERED for
    every harness, listed apart from what a harness itself says it does not support."""


class CaseUnsupported(NotCovered):
    """The implementation has the function but not this case (a harness answered ``ERROR
    unsupported``, or the protocol cannot carry it): NOT COVERED for this case, not the test."""


class HarnessFault(AssertionError):
    """An ``exec:`` harness misbehaved on a call (crash, hang, malformed or short frame, wrong shape
    or dtype): the test that made the call fails (an AssertionError: the implementation's failure,
    not the suite's error)."""


PASS_THROUGH = (NotCovered, HarnessFault)
"""Never a decision of the implementation: a check that turns exceptions into verdicts re-raises
these (NOT COVERED skips; harness faults fail as themselves)."""


def cupy_or_none() -> ModuleType | None:
    try:
        import cupy
    except Exception:  # ImportError, or a CUDA runtime that fails to load
        return None
    return cupy


@functools.lru_cache(maxsize=1)
def cupy_device_reason() -> str | None:
    """None if a CUDA device is usable, else why not.

    "Usable" is what gpu_impl needs, probed in the order it fails on a half-installed image:
    a device, NVRTC (every RawKernel and CuPy's own elementwise kernels compile through it),
    then cuBLAS (the ops' matmuls). A device whose CUDA libraries are missing otherwise errors
    only at the first compile, in the middle of a run.
    """
    cp = cupy_or_none()
    if cp is None:
        return "cupy is not installed or its CUDA runtime does not load (pip install 'logitcheck[gpu]')"
    steps = (("no CUDA device is available", lambda: cp.is_available() or None),
             ("NVRTC cannot compile a kernel", lambda: _probe_nvrtc(cp)),
             ("cuBLAS cannot run a matmul", lambda: _probe_cublas(cp)))
    for what, probe in steps:
        try:
            if probe() is None:
                return f"cupy {cp.__version__} is installed but {what}"
        except Exception as exc:  # driver, NVRTC or cuBLAS load errors all land here
            return f"cupy {cp.__version__}: {what}: {type(exc).__name__}: {exc}"
    return None


def _probe_nvrtc(cp: ModuleType) -> bool:
    k = cp.RawKernel(r'''extern "C" __global__ void lc_probe(float* y) { y[threadIdx.x] = 2.0f * threadIdx.x; }''',
                     "lc_probe")
    y = cp.zeros(32, cp.float32)
    k((1,), (32,), (y,))
    return bool((y == 2 * cp.arange(32, dtype=cp.float32)).all())


def _probe_cublas(cp: ModuleType) -> bool:
    a = cp.eye(64, dtype=cp.float32)
    return bool(((a @ a) == a).all())


class Impl:
    """Calls ``module.name(*args)`` with arrays moved to the backend and results moved back."""

    def __init__(self, module: ModuleType, backend: str) -> None:
        self.module, self.backend = module, backend
        self.xp = np if backend == "numpy" else cupy_or_none()  # emulated: the stand-in, installed as cupy
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
        return self.xp.asarray(x)  # bfloat16 too: CuPy >= 14 holds ml_dtypes.bfloat16 arrays

    def to_host(self, x: Any) -> Any:
        if isinstance(x, tuple):
            return tuple(self.to_host(v) for v in x)
        if self.backend != "numpy" and hasattr(x, "get"):
            return x.get()
        return np.asarray(x) if hasattr(x, "__array__") else x

    def qualified(self, fn: str) -> str:
        """``fn``'s name in the signature table: ``engines.x`` for the engines module, ``x`` at the top."""
        part = self.name.rsplit(".", 1)[-1].split("[", 1)[0] if "." in self.name else ""
        return f"{part}.{fn}" if part in _PARTS else fn

    def __call__(self, fn: str, *args: Any, **kwargs: Any) -> Any:
        f = self.function(fn)
        CALLED.add(self.qualified(fn))
        if os.environ.get(CALL_LOG_ENV):
            log_call(os.environ[CALL_LOG_ENV], self.qualified(fn), args, kwargs)
        if getattr(f, "__module__", None) == "properties.protocol.harness":
            from properties.protocol.harness import HarnessUnsupported
            try:
                return f(*args, **kwargs)
            except (HarnessUnsupported, NotCovered) as exc:
                carried = not isinstance(exc, CaseNotCarried)
                NOT_COVERED.add(f"{self.name}.{fn} " + ("(some cases: the harness answered unsupported)" if carried
                                                        else "(cases the protocol cannot carry)"))
                raise CaseUnsupported(str(exc)) from None
        out = f(*(self.to_device(a) for a in args), **{k: self.to_device(v) for k, v in kwargs.items()})
        return self.to_host(out)


def fingerprint(value: Any) -> Any:
    """What the coverage meta test needs to know of one argument: a token history (2-D integers)
    is "empty" or "ids"; a per-row parameter or scalar its distinct values; a larger array "array"."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return [value if not isinstance(value, float) else float(f"{value:.6g}")]
    a = np.asarray(value.get() if hasattr(value, "get") else value)
    if a.dtype.kind in "iu" and a.ndim == 2:
        return "ids" if (a >= 0).any() else "empty"
    if a.size > 64 or a.dtype.kind not in "iufb":
        return "array"
    vals = {float(f"{float(v):.6g}") if a.dtype.kind == "f" else int(v) for v in a.ravel()}
    return sorted(vals, key=float)[:16]


def log_call(path: str, qualified: str, args: tuple, kwargs: dict) -> None:
    """One JSON line per call (appends are atomic for lines this short on a local file)."""
    import json

    from properties import recording
    from properties.protocol.signatures import argument_names

    try:
        names = argument_names(qualified)
    except KeyError:  # a helper outside the signature table
        names = tuple(f"arg{i}" for i in range(len(args)))
    bound = {**dict(zip(names, args)), **kwargs}
    row = {"test": recording.CURRENT_TEST, "fn": qualified,
           "args": {n: fingerprint(bound[n]) if n in bound else "default" for n in names}}
    with open(path, "a", encoding="utf-8") as fh:
        fh.write(json.dumps(row) + "\n")


_EXEC: dict[str, ModuleType] = {}


def load_impl(module_name: str, backend: str, module: ModuleType | None = None) -> Impl:
    """``module_name`` is a Python module with gpu_impl's API, or ``exec:CMD``: an engine's
    harness process spoken to over the protocol (docs/protocol.md), started once per process."""
    if module is None:
        from properties.protocol.harness import exec_module, parse_command

        command = parse_command(module_name)
        if command is not None:
            if command not in _EXEC:
                _EXEC[command] = exec_module(command)
            module = _EXEC[command]
    return Impl(module if module is not None else importlib.import_module(module_name), backend)


def part_of(impl: Impl, part: str) -> ModuleType | None:
    """The implementation's ``part`` module (ops, quants, engines) if it carries one as an
    attribute (an ``exec:`` harness does), else None (import ``<impl>.<part>`` instead)."""
    sub = getattr(impl.module, part, None)
    return sub if isinstance(sub, ModuleType) else None
