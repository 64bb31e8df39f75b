"""Float64 specification of the transformer ops engine ports get wrong.

Every op states its refusals (ValueError) and its non-finite decisions in its module
docstring; gpu_impl.ops makes the same decisions with independent code. Inputs may be float16,
bfloat16 (ml_dtypes) or float32 NumPy arrays: they are widened exactly to float64.
"""
from oracle.ops.activations import geglu, gelu, silu, softcap, swiglu
from oracle.ops.attention import KVCache, attention, attention_step, visibility
from oracle.ops.linear import argmax, embedding, matmul, output_logits, project_qkv
from oracle.ops.norms import layer_norm, rms_norm
from oracle.ops.rope import rope, yarn_corr_dims
from oracle.ops.softmax import log_softmax, softmax

__all__ = [
    "softmax", "log_softmax", "rms_norm", "layer_norm", "rope", "yarn_corr_dims", "attention",
    "attention_step", "visibility", "KVCache", "gelu", "silu", "swiglu", "geglu", "softcap",
    "matmul", "embedding", "project_qkv", "output_logits", "argmax",
]
