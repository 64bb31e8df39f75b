"""A plain C/C++/Rust CPU engine (llama2.c, candle-CPU shape): one float accumulator per
reduction in index order, ``1.0f / sqrtf`` for norms, division for softmax; matmul as ggml-CPU's
vector dot (32 FMA lanes, a lane tree, a scalar tail); attention as ggml-CPU's flash-attention
loop (one key at a time, online softmax)."""
from properties.zoo.conforming._arith import SEQUENTIAL
from properties.zoo.conforming._attention import attention_functions, make_attention
from properties.zoo.conforming._build import install
from properties.zoo.conforming._ops import dot_simd, op_functions

install(globals(), "gpu_impl.ops", {**op_functions(SEQUENTIAL, dot_simd),
                                    **attention_functions(make_attention(tile=1))})
