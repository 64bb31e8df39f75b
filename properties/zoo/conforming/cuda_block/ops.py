"""ggml-CUDA-style ops: block-tree softmax with a reciprocal multiply; rms_norm as a float32
block sum of squares and ``x · rsqrtf(mean + eps)``; layer_norm by per-thread Welford and a
Chan merge tree (PyTorch-CUDA's shape); matmul as FMA chains with split-K; attention as a
flash-attention kernel over 64-key tiles."""
from properties.zoo.conforming._arith import BLOCK
from properties.zoo.conforming._attention import attention_functions, make_attention
from properties.zoo.conforming._build import install
from properties.zoo.conforming._ops import dot_split_k, inv_sqrt_rsqrt, op_functions, welford_layer_norm

install(globals(), "gpu_impl.ops", {**op_functions(BLOCK, dot_split_k, inv_sqrt_rsqrt),
                                    "layer_norm": welford_layer_norm,
                                    **attention_functions(make_attention(tile=64, reciprocal=True))})
