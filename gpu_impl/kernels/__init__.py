"""Fused CUDA kernels: gpu_impl's path when the input is a CuPy array (the array code is the
NumPy path). CUDA C in ``*.cu`` beside this file, compiled once per process into one RawModule.

``CUDA_SOURCES`` maps a compilation unit to its full text and ``ENTRY_POINTS`` lists the kernels
in it, so that CI can compile everything with ``nvcc -ptx`` on a machine without a GPU.
"""
from gpu_impl.kernels._build import ENTRY_POINTS, WIN, cuda_source, fits
from gpu_impl.kernels.dist import dist_rows
from gpu_impl.kernels.filters import (ChainPlan, chain_rows, mask_prefix, min_p_rows, plan_chain, top_k_rows,
                                      top_p_rows)
from gpu_impl.kernels.select import nth_largest
from gpu_impl.kernels.softmax_rows import row_max, row_stats, softmax_rows

CUDA_SOURCES: dict[str, str] = {"logitcheck_kernels": cuda_source()}

__all__ = ["CUDA_SOURCES", "ENTRY_POINTS", "WIN", "fits", "row_max", "softmax_rows", "row_stats", "nth_largest",
           "top_k_rows", "min_p_rows", "top_p_rows", "mask_prefix", "ChainPlan", "plan_chain", "chain_rows",
           "dist_rows"]
