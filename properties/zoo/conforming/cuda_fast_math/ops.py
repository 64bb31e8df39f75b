"""ggml-CUDA-style ops compiled with -use_fast_math: block-tree softmax and log-softmax with
``__expf`` and e·(1.0f / s) under -prec-div=false (2 ulp off), rsqrtf norms at their documented
2 ulp, split-K matmul, and flash attention over 64-key tiles whose exponentials are ``__expf``
and whose final 1 / s is the fast division too; ggml-CUDA's RoPE with ``__powf`` (``_rope``)."""
from functools import partial

from properties.zoo.conforming._arith import F32, FAST_MATH, fast_divide, fast_exp, fast_rsqrt
from properties.zoo.conforming._attention import attention_functions, make_attention
from properties.zoo.conforming._build import install
from properties.zoo.conforming._ops import dot_split_k, op_functions, welford_layer_norm
from properties.zoo.conforming._rope import rope

install(globals(), "gpu_impl.ops", {**op_functions(FAST_MATH, dot_split_k, fast_rsqrt),
                                    "layer_norm": partial(welford_layer_norm, inv_sqrt=fast_rsqrt), "rope": rope,
                                    **attention_functions(make_attention(
                                        tile=64, reciprocal=lambda s: fast_divide(F32(1), s), exp=fast_exp))})
