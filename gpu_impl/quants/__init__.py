"""Dequantization of GGML block formats, quantized get_rows and mat-vec, on NumPy or CuPy.

API (every function takes raw bytes as a uint8 array on the backend it should run on):

* ``dequantize(raw, qtype, shape) -> float32[shape]``
* ``dequantize_row(raw, qtype, row_len, row_index, base=0) -> float32[row_len]``
* ``get_rows(raw, qtype, shape, ids) -> float32[len(ids), n]``
* ``matvec(raw, qtype, shape, x) -> float32[rows]`` (fp32 accumulation)

``qtype`` is a GGML type id (``gguf.GGMLQuantizationType`` members work). Unknown ids, byte
counts that are not whole blocks or do not match ``shape``, and empty tensors raise ValueError.
Formats: F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL,
IQ4_XS, MXFP4. This package never imports ``oracle``.
"""
from gpu_impl.quants import blocks32, plain, superblocks  # noqa: F401  (register the decoders)
from gpu_impl.quants.layout import FORMATS, dequantize
from gpu_impl.quants.rows import dequantize_row, get_rows, matvec

__all__ = ["FORMATS", "dequantize", "dequantize_row", "get_rows", "matvec"]
