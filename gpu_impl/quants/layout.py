"""Format table and the checked dequantize entry point.

A block decoder maps ``[n_blocks, type_size]`` uint8 to ``[n_blocks, block_size]`` float32 and
is written with whole-array ops only (slices, shifts, reshapes, lookups), so the same code runs
on NumPy and on CuPy. Every float op is a separate array op, so nothing is contracted into an
FMA: each rounding is the float32 rounding ggml's reference performs.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Sequence

import numpy as np


def array_module(x: Any):
    """NumPy for NumPy input; CuPy for CuPy arrays (imported only when needed)."""
    if isinstance(x, (np.ndarray, np.generic, bytes, bytearray, memoryview)):
        return np
    try:
        import cupy
    except Exception:  # no CuPy, or no CUDA runtime: only NumPy input is possible anyway
        return np
    return cupy.get_array_module(x)


@dataclass(frozen=True)
class Format:
    name: str
    type_id: int
    block: int
    nbytes: int
    decode: Callable[[Any], Any]


FORMATS: dict[int, Format] = {}
HOST_CHUNK = 1 << 18  # elements per NumPy decode pass


def register(name: str, type_id: int, block: int, nbytes: int):
    def wrap(fn: Callable[[Any], Any]) -> Callable[[Any], Any]:
        FORMATS[type_id] = Format(name, type_id, block, nbytes, fn)
        return fn
    return wrap


def lookup(qtype: int) -> Format:
    try:
        key = int(qtype)
    except (TypeError, ValueError):
        key = None
    if key not in FORMATS:
        known = ", ".join(f"{f.name}={t}" for t, f in sorted(FORMATS.items()))
        raise ValueError(f"unknown or unsupported GGML type id {qtype!r} (known: {known})")
    return FORMATS[key]


def flat_bytes(raw: Any):
    xp = array_module(raw)
    if isinstance(raw, (bytes, bytearray, memoryview)):
        return np.frombuffer(raw, dtype=np.uint8)
    if raw.dtype != xp.uint8:
        raise ValueError(f"quantized data must be a uint8 byte array, got dtype {raw.dtype}")
    return raw.reshape(-1)


def checked_shape(fmt: Format, shape: Sequence[int]) -> tuple[int, ...]:
    shape = tuple(int(s) for s in shape)
    if not shape or min(shape) < 0:
        raise ValueError(f"{fmt.name}: bad tensor shape {shape}")
    n = int(np.prod(shape, dtype=np.int64))
    if n == 0:
        raise ValueError(f"{fmt.name}: tensor of shape {shape} is empty")
    if shape[-1] % fmt.block:
        raise ValueError(f"{fmt.name}: rows of {shape[-1]} elements are not whole {fmt.block}-element blocks")
    return shape


def dequantize(raw: Any, qtype: int, shape: Sequence[int]):
    """The float32 tensor of ``shape`` stored in ``raw`` as ``qtype`` blocks."""
    fmt = lookup(qtype)
    shape = checked_shape(fmt, shape)
    data = flat_bytes(raw)
    if data.size % fmt.nbytes:
        raise ValueError(f"{fmt.name}: {data.size} bytes is not a whole number of {fmt.nbytes}-byte blocks")
    n_blocks = int(np.prod(shape, dtype=np.int64)) // fmt.block
    if data.size != n_blocks * fmt.nbytes:
        raise ValueError(f"{fmt.name}: shape {shape} is {n_blocks} blocks = {n_blocks * fmt.nbytes} bytes, "
                         f"got {data.size}")
    blocks = data.reshape(n_blocks, fmt.nbytes)
    xp = array_module(blocks)
    if xp is not np or n_blocks * fmt.block <= HOST_CHUNK:
        with np.errstate(all="ignore"):  # NaN/inf scales propagate by IEEE rules; NumPy need not warn
            return fmt.decode(blocks).reshape(shape)
    out = np.empty((n_blocks, fmt.block), np.float32)
    step = HOST_CHUNK // fmt.block  # on the host, cache-sized pieces beat one huge pass
    with np.errstate(all="ignore"):
        for i in range(0, n_blocks, step):
            out[i:i + step] = fmt.decode(blocks[i:i + step])
    return out.reshape(shape)
