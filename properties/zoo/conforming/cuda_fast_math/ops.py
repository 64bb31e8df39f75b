"""ggml-CUDA-style ops compiled with -use_fast_math: block-tree softmax and log-softmax with
``__expf`` and a reciprocal multiply, rsqrt norms, split-K matmul, and flash attention over 64-key
tiles whose exponentials are ``__expf`` too."""
from properties.zoo.conforming._arith import FAST_MATH, fast_exp
from properties.zoo.conforming._attention import attention_functions, make_attention
from properties.zoo.conforming._build import install
from properties.zoo.conforming._ops import dot_split_k, inv_sqrt_rsqrt, op_functions, welford_layer_norm

install(globals(), "gpu_impl.ops", {**op_functions(FAST_MATH, dot_split_k, inv_sqrt_rsqrt),
                                    "layer_norm": welford_layer_norm,
                                    **attention_functions(make_attention(tile=64, reciprocal=True, exp=fast_exp))})
