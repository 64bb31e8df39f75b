"""A module standing in for CuPy on a machine without a GPU: NumPy arrays as device arrays
(``Device``), NumPy's functions as CuPy's, and gpu_impl's kernels emulated from their CUDA source
(``launch.EmulatedKernel``). With ``emulated_device(monkeypatch)`` gpu_impl takes its device path
on ``cp.asarray(x)`` rows exactly as on CuPy: validation, kernel choice, launches, workspaces,
and graph replay through the stand-in graph (``standin.FakeGraphs``: a capture or a replay runs
the call with every device read and host upload refused, as a capturing stream refuses them).
"""
from __future__ import annotations

import sys
from collections import OrderedDict
import types
from typing import Any

import numpy as np
import pytest

from gpu_impl import _array, _graphs
from gpu_impl.kernels import _build
from properties.gpu.emulator.launch import EmulatedKernel
from properties.gpu.standin import Device, FakeGraphs


F32_TINY = np.float32(2.0**-126)
NOT_FLUSHED = frozenset({np.matmul})
"""Ufuncs CuPy hands to a library that keeps subnormals (cuBLAS), not to its own kernels."""


def flush(a: Any) -> Any:
    """What CuPy's own kernels see of a float32 value: subnormals as zero of the same sign. CuPy
    compiles every kernel it generates (ufuncs, reductions, scans, ``astype``) with ``-ftz=true``,
    which flushes float32 subnormal operands and results, comparisons included; gpu_impl's
    kernels are compiled without it (``gpu_impl.kernels._build``). Other dtypes pass unchanged."""
    if getattr(a, "dtype", None) != np.float32:
        return a
    a = np.asarray(a)
    tiny = np.abs(a) < F32_TINY
    return np.where(tiny, np.copysign(np.float32(0), a), a) if tiny.any() else a


class DeviceArray(Device):
    """A device array as CuPy has them: indexing one element and reducing give 0-d arrays (read
    with ``.get()``, ``int()`` or ``bool()``), not NumPy scalars; every read is refused while a
    stream captures (``Device.READS_REFUSED``), as on CUDA. Arithmetic on it is CuPy's: float32
    subnormal operands and results flushed to zero (``flush``)."""

    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, out: Any = None, **kwargs: Any) -> Any:
        keep = ufunc in NOT_FLUSHED
        args = [(np.asarray(x) if keep else flush(np.asarray(x))) if isinstance(x, (np.ndarray, np.generic)) else x
                for x in inputs]
        if out is not None:
            kwargs["out"] = tuple(np.asarray(o) for o in out)
        result = getattr(ufunc, method)(*args, **kwargs)
        if out is not None:
            for o in kwargs["out"]:
                o[...] = o if keep else flush(o)
            return out[0] if len(out) == 1 else out
        if isinstance(result, tuple):
            return tuple(_device(r if keep else flush(r)) for r in result)
        return _device(result if keep else flush(result))

    def astype(self, dtype: Any, *args: Any, **kwargs: Any) -> Any:
        """CuPy's conversion kernel: a float32 subnormal converts as zero (the same dtype: a copy)."""
        if np.dtype(dtype) == self.dtype:
            return _device(np.asarray(self).astype(dtype, *args, **kwargs))
        return _device(flush(flush(np.asarray(self)).astype(dtype, *args, **kwargs)))

    def argmax(self, *args: Any, **kwargs: Any) -> Any:
        return _device(flush(np.asarray(self)).argmax(*args, **kwargs))

    def argmin(self, *args: Any, **kwargs: Any) -> Any:
        return _device(flush(np.asarray(self)).argmin(*args, **kwargs))

    @property
    def data(self) -> Any:
        """CuPy's memory pointer (``.data.ptr``), which any dtype has (NumPy's buffer refuses bfloat16)."""
        return types.SimpleNamespace(ptr=self.__array_interface__["data"][0])

    def _read(self) -> None:
        if Device.READS_REFUSED:
            raise RuntimeError("a device read while the stream is capturing")

    def _reading(convert: Any) -> Any:  # noqa: N805 (a method factory, used in the class body)
        def read(self: "DeviceArray", *args: Any) -> Any:
            self._read()
            return convert(np.asarray(self), *args)
        return read

    __int__ = __index__ = _reading(int)
    __float__ = _reading(float)
    __bool__ = _reading(bool)
    item = _reading(lambda a, *index: a.item(*index))
    tolist = _reading(lambda a: a.tolist())
    del _reading

    def __getitem__(self, index: Any) -> Any:
        got = super().__getitem__(index)
        return np.asarray(got).view(DeviceArray) if isinstance(got, np.generic) else got

    def __array_wrap__(self, arr: np.ndarray, context: Any = None, return_scalar: bool = False) -> Any:
        return np.asarray(arr).view(DeviceArray)


def _device(v: Any) -> Any:
    if isinstance(v, np.generic):
        return np.asarray(v).view(DeviceArray)
    return v.view(DeviceArray) if type(v) is np.ndarray or type(v) is Device else v


class GraphsNotEmulated(NotImplementedError):
    """CUDA graphs are captured through ``_graphs.BACKEND`` (the stand-in graph), not streams."""


class _Stream:
    ptr = 0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        pass

    def __enter__(self) -> "_Stream":
        return self

    def __exit__(self, *exc: Any) -> None:
        pass

    def is_capturing(self) -> bool:
        return Device.READS_REFUSED  # the stand-in graph refuses reads exactly while it captures or replays

    def synchronize(self) -> None:
        pass

    def begin_capture(self) -> None:
        raise GraphsNotEmulated("stream capture is not emulated (gpu_impl's graphs use the stand-in graph)")


class _Cuda:
    class runtime:  # noqa: N801 (CuPy's name)
        @staticmethod
        def getDevice() -> int:  # noqa: N802 (CuPy's name)
            return 0

    Stream = _Stream

    @staticmethod
    def get_current_stream() -> _Stream:
        return _Stream()


class EmulatedCupy(types.ModuleType):
    """``cupy``: NumPy, with every function's array result a ``Device`` array."""

    ndarray = DeviceArray
    cuda = _Cuda

    def __init__(self) -> None:
        super().__init__("cupy")

    def __getattr__(self, name: str) -> Any:
        v = getattr(np, name)
        if isinstance(v, (types.FunctionType, types.BuiltinFunctionType)) or type(v).__name__ == "_ArrayFunctionDispatcher":
            return lambda *a, **k: _device(v(*a, **k))
        return v

    def asarray(self, a: Any, dtype: Any = None) -> DeviceArray:
        if Device.READS_REFUSED and not isinstance(a, Device):
            raise RuntimeError("a host -> device copy while the stream is capturing")
        return np.asarray(a, dtype).view(DeviceArray)

    def asnumpy(self, a: Any) -> np.ndarray:
        if isinstance(a, DeviceArray):
            a._read()
        return np.array(a)

    def get_array_module(self, *arrays: Any) -> Any:
        return self if any(isinstance(a, Device) for a in arrays) else np


CP = EmulatedCupy()


def _cupyx() -> dict[str, types.ModuleType]:
    """``cupyx``'s parts gpu_impl uses: scatter_add and scipy.special, NumPy and SciPy's."""
    import scipy.special
    root, sci = types.ModuleType("cupyx"), types.ModuleType("cupyx.scipy")
    root.scatter_add = lambda a, index, values: np.add.at(a, index, values)
    root.scipy, sci.special = sci, scipy.special
    return {"cupyx": root, "cupyx.scipy": sci, "cupyx.scipy.special": scipy.special}


def _patches(seed: int, source: str | None = None) -> list[tuple[Any, str, Any]]:
    """(owner, attribute, stand-in): ``cupy`` itself, every ``get_xp`` gpu_impl holds (Device
    rows are NumPy arrays, which the real one gives to NumPy), the kernels' loader."""
    real = _array.get_xp
    get_xp = lambda x: CP if isinstance(x, Device) else real(x)  # noqa: E731
    kernels: dict[str, EmulatedKernel] = {}

    def kernel(device: int, name: str) -> EmulatedKernel:
        if name not in kernels:
            kernels[name] = EmulatedKernel(name, seed, source)
        return kernels[name]
    out: list[tuple[Any, str, Any]] = [(sys.modules, "cupy", CP), *((sys.modules, k, v) for k, v in _cupyx().items()),
                                       (_graphs, "BACKEND", FakeGraphs()),
                                       (_build, "_function", kernel)]
    # graphs and constants start empty (a test's are dropped after it)
    out += [(_graphs, name, OrderedDict()) for name in ("_GRAPHS", "_SEEN", "_REFUSED", "_CONSTANTS")]
    for name, module in list(sys.modules.items()):
        if (name == "gpu_impl" or name.startswith("gpu_impl.")) and getattr(module, "get_xp", None) is real:
            out.append((module, "get_xp", get_xp))
    return out


def emulated_device(monkeypatch: pytest.MonkeyPatch, seed: int = 0, source: str | None = None) -> EmulatedCupy:
    """gpu_impl sees ``Device`` rows as CuPy rows and launches the emulated kernels (blocks and
    threads in orders drawn from ``seed``; ``source``: a changed kernel text) for one test;
    returns the stand-in module."""
    for owner, name, value in _patches(seed, source):
        if owner is sys.modules:
            monkeypatch.setitem(sys.modules, name, value)
        else:
            monkeypatch.setattr(owner, name, value)
    return CP


def install(seed: int = 0) -> EmulatedCupy:
    """As ``emulated_device``, for the whole process (``--backend emulated``)."""
    for owner, name, value in _patches(seed):
        if owner is sys.modules:
            sys.modules[name] = value
        else:
            setattr(owner, name, value)
    return CP
