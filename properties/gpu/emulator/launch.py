"""gpu_impl's CUDA kernels, their own source, compiled for the CPU (cuda_shim.h, fibers.cpp) and
launched on NumPy arrays as CuPy launches them: ``kernel(name)((grid), (block), args)``.

A launch checks what CuPy does not: each pointer parameter gets an array, each scalar a NumPy
scalar of the parameter's width (CuPy would pass a wrong-width scalar's bytes as they are).
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gpu_impl.kernels import ENTRY_POINTS, cuda_source

HERE = Path(__file__).parent
CXX = shutil.which("g++") or shutil.which("c++")
FLAGS = ("-O1", "-std=c++17", "-shared", "-fPIC", "-fno-strict-aliasing", "-ffp-contract=off",
         "-Wno-unknown-pragmas")
_SIGNATURE = re.compile(r'extern "C" __global__ void\s+(?:__launch_bounds__\([^)]*\)\s*)?(\w+)\s*\(([^)]*)\)')
_LOCK = threading.Lock()


@dataclass(frozen=True)
class Param:
    name: str
    ctype: str  # as declared, without __restrict__

    @property
    def pointer(self) -> bool:
        return self.ctype.endswith("*")


def signatures(source: str) -> dict[str, tuple[Param, ...]]:
    """Every kernel's parameters, read from its declaration."""
    out = {}
    for name, params in _SIGNATURE.findall(source):
        got = []
        for decl in params.split(","):
            decl = " ".join(decl.replace("__restrict__", "").split())
            m = re.fullmatch(r"(.*?)\s*(\w+)", decl)
            got.append(Param(m.group(2), m.group(1).strip()))
        out[name] = tuple(got)
    return out


def unavailable_reason() -> str | None:
    return None if CXX else "no C++ compiler (g++) on PATH to build the kernel emulator"


def _unit(source: str, sigs: dict[str, tuple[Param, ...]]) -> str:
    """One translation unit: the shim, the kernels, the scheduler, one trampoline per kernel
    (args[i] points at the i-th argument, as in cuLaunchKernel) and the parameter widths."""
    parts = [(HERE / "cuda_shim.h").read_text(), source, (HERE / "fibers.cpp").read_text()]
    for name, params in sigs.items():
        call = ", ".join(f"*({p.ctype}*)a[{i}]" for i, p in enumerate(params))
        parts.append(f'extern "C" void emu_{name}(void** a) {{ {name}({call}); }}')
        sizes = ", ".join(f"sizeof({p.ctype})" for p in params) or "0"
        parts.append(f'extern "C" const int emu_sizes_{name}[] = {{ {sizes} }};')
    return "\n".join(parts)


@functools.lru_cache(maxsize=4)
def library(source: str | None = None) -> tuple[ctypes.CDLL, dict[str, tuple[Param, ...]]]:
    """The emulator compiled with ``source`` (gpu_impl's kernels when None): built once per
    text, cached under the temp folder."""
    reason = unavailable_reason()
    if reason:
        raise RuntimeError(reason)
    own = source is None
    source = cuda_source() if own else source
    sigs = signatures(source)
    missing = [e for e in ENTRY_POINTS if e not in sigs] if own else []
    if missing:
        raise RuntimeError(f"kernels whose declaration the emulator cannot read: {missing}")
    unit = _unit(source, sigs)
    digest = hashlib.sha256((unit + " ".join(FLAGS)).encode()).hexdigest()[:16]
    cache = Path(tempfile.gettempdir()) / f"logitcheck-emulator-{os.getuid()}"
    cache.mkdir(exist_ok=True)
    lib = cache / f"kernels-{digest}.so"
    if not lib.exists():
        src = cache / f"kernels-{digest}-{os.getpid()}.cpp"
        src.write_text(unit)
        tmp = lib.with_suffix(f".{os.getpid()}.tmp")
        proc = subprocess.run([CXX, *FLAGS, str(src), "-o", str(tmp)], capture_output=True, text=True, timeout=600)
        if proc.returncode != 0:
            raise RuntimeError(f"the kernel emulator does not build:\n{proc.stderr[-4000:]}")
        os.replace(tmp, lib)  # atomic: parallel workers may build the same file
        src.unlink()
    dll = ctypes.CDLL(str(lib))
    dll.emu_run.restype = ctypes.c_char_p
    dll.emu_run.argtypes = [ctypes.c_void_p, ctypes.c_void_p] + [ctypes.c_uint] * 6 + [ctypes.c_ulonglong]
    return dll, sigs


class EmulatedKernel:
    """A kernel launched as CuPy's RawKernel is: ``k(grid, block, args)``. ``seed`` draws the
    order of blocks and of threads within a phase; ``source``: other CUDA text than gpu_impl's."""

    def __init__(self, name: str, seed: int = 0, source: str | None = None) -> None:
        dll, sigs = library(source)
        self.name, self.params, self.seed = name, sigs[name], seed
        self._fn = ctypes.cast(getattr(dll, f"emu_{name}"), ctypes.c_void_p)
        sizes = (ctypes.c_int * max(1, len(self.params))).in_dll(dll, f"emu_sizes_{name}")
        self._sizes = list(sizes)[:len(self.params)]
        self._run = dll.emu_run
        self.launches = 0

    def _arg(self, i: int, p: Param, a: Any) -> Any:
        if p.pointer:
            if not isinstance(a, np.ndarray):
                raise TypeError(f"{self.name}: parameter {p.name} ({p.ctype}) needs an array, got {type(a).__name__}")
            if not a.flags.c_contiguous:
                raise TypeError(f"{self.name}: parameter {p.name} gets a non-contiguous array")
            return ctypes.c_void_p(a.ctypes.data)
        if not isinstance(a, np.generic) or a.dtype.itemsize != self._sizes[i]:
            raise TypeError(f"{self.name}: parameter {p.name} ({p.ctype}, {self._sizes[i]} bytes) gets "
                            f"{a!r} ({type(a).__name__}): CuPy would pass the wrong bytes")
        return (ctypes.c_char * a.dtype.itemsize).from_buffer_copy(a.tobytes())

    def __call__(self, grid: tuple, block: tuple, args: tuple) -> None:
        if len(args) != len(self.params):
            raise TypeError(f"{self.name}: {len(self.params)} parameters, {len(args)} arguments")
        held = [self._arg(i, p, a) for i, (p, a) in enumerate(zip(self.params, args))]
        ptrs = (ctypes.c_void_p * max(1, len(held)))(*[ctypes.addressof(h) for h in held])
        g = tuple(grid) + (1,) * (3 - len(grid))
        b = tuple(block) + (1,) * (3 - len(block))
        if min(g) < 1:
            raise ValueError(f"{self.name}: empty grid {grid}")
        with _LOCK:  # one scheduler per process
            why = self._run(self._fn, ptrs, *map(int, g), *map(int, b), self.seed + self.launches)
        self.launches += 1
        if why is not None:
            raise RuntimeError(f"{self.name} on grid {grid}, block {block}: {why.decode()}")
