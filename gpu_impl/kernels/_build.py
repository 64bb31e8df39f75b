"""The CUDA sources of gpu_impl's CuPy path, compiled once per process into one RawModule.

Only ``cuda_source()`` runs without CuPy (CI compiles it with ``nvcc -ptx``); everything else
imports CuPy and needs a device.
"""
from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Any

import numpy as np

SOURCE_FILES = ("prelude.cuh", "row_max.cu", "softmax.cu", "radix_select.cu", "mask.cu", "window.cu", "dist.cu")
ENTRY_POINTS = ("lc_row_max", "lc_row_stats", "lc_softmax_write", "lc_radix_pass", "lc_radix_finish",
                "lc_mask_prefix", "lc_count_ge", "lc_min_p_mask", "lc_window_gather", "lc_window_cut",
                "lc_chain_finish", "lc_top_p_finish", "lc_dist_partials", "lc_dist_pick")

# mirrors of the sources' #defines (prelude.cuh, radix_select.cu, window.cu)
THREADS, CHUNK, BINS, WIN, STATE_BYTES = 256, 4096, 2048, 1024, 96
MAX_ROWS = 65535       # rows are gridDim.y
MAX_VOCAB = 1 << 24    # fixed-point masses: V * 2^40 must fit in 64 bits
_TARGET_BLOCKS = 1024  # histogram/count passes: about this many blocks in flight, whatever B


def cuda_source() -> str:
    here = Path(__file__).parent
    return "\n".join((here / name).read_text() for name in SOURCE_FILES)


def fits(shape: tuple[int, int]) -> bool:
    """Can the kernels take a [B, V] batch (else gpu_impl's array code runs on CuPy)."""
    return 1 <= shape[0] <= MAX_ROWS and 1 <= shape[1] < MAX_VOCAB


# CuPy compiles every RawModule with -ftz=true (subnormal float32 operands and results flushed
# to zero, comparisons included), which breaks the suite's subnormal rows (top_p's order, a
# softmax whose tail p is subnormal). The kernels are IEEE float32, so they are compiled here
# through NVRTC with -ftz=false and loaded as a module; one compile per process and device.
NVRTC_OPTIONS = ("-ftz=false", "-prec-div=true", "-prec-sqrt=true", "-std=c++17")


@functools.lru_cache(maxsize=None)
def _module(device: int) -> Any:
    from cupy.cuda import compiler, function
    binary, _ = compiler.compile_using_nvrtc(cuda_source(), options=NVRTC_OPTIONS, filename="logitcheck_kernels.cu")
    module = function.Module()
    module.load(binary)
    return module


@functools.lru_cache(maxsize=None)
def _function(device: int, name: str) -> Any:
    return _module(device).get_function(name)


def fn(name: str) -> Any:
    """The compiled kernel ``name`` for the current device (cached: launching is all that is left)."""
    import cupy
    return _function(cupy.cuda.runtime.getDevice(), name)


def n_chunks(V: int) -> int:
    return -(-V // CHUNK)


def span(B: int, V: int) -> tuple[int, int]:
    """(columns per block, blocks per row) for the passes whose result is exact (integer counts),
    so the split may follow the batch: many blocks per row when the batch is small."""
    per_row = max(1, min(-(-V // 2048), -(-_TARGET_BLOCKS // B)))
    cols = -(-V // per_row)
    cols = -(-cols // THREADS) * THREADS
    return cols, -(-V // cols)


def i32(v: int) -> np.int32:
    return np.int32(v)


def i64(v: int) -> np.int64:
    return np.int64(v)


def grid1(B: int, threads: int = 128) -> tuple[int]:
    return (max(1, math.ceil(B / threads)),)
