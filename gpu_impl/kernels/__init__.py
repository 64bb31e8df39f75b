"""Fused CUDA kernels, used only when the input is a CuPy array.

``CUDA_SOURCES`` maps each kernel's entry point to its CUDA C source so that a test can compile
every one with ``nvcc -ptx`` on a machine without a GPU.
"""
from gpu_impl.kernels.softmax_rows import SOFTMAX_ROWS_SOURCE, softmax_rows

CUDA_SOURCES: dict[str, str] = {"softmax_rows_f32": SOFTMAX_ROWS_SOURCE}

__all__ = ["CUDA_SOURCES", "softmax_rows"]
