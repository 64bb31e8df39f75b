"""Bit-exact NumPy specification of GGML's block formats (what a GGUF tensor's bytes mean).

``dequantize(raw, qtype, shape)`` decodes; ``quantize(values, qtype)`` encodes where ggml has a
reference quantizer that gguf-py reproduces (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, BF16, plus F32/F16);
``rows`` has the per-row helpers engines need. Independent of gguf-py, which is the peer that
checks it, and of gpu_impl, which it judges.
"""
from oracle.quants import floats, kquants, legacy, lookup  # noqa: F401  (register the codecs)
from oracle.quants.formats import BLOCK, DECODERS, ENCODERS, QType, byte_count, dequantize, qtype_of, quantize
from oracle.quants.rows import dequantize_row, get_rows, matvec

__all__ = ["BLOCK", "DECODERS", "ENCODERS", "QType", "byte_count", "dequantize", "qtype_of", "quantize",
           "dequantize_row", "get_rows", "matvec"]
