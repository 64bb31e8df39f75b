"""ggml-CPU's shape of the reducing ops: double accumulators for the softmax normaliser and the
norms' sums (``1.0f / sqrtf`` of the float mean); matmul and attention computed in double and
rounded once."""
import numpy as np

from properties.zoo.conforming._arith import F64
from properties.zoo.conforming._attention import attention_functions, make_attention
from properties.zoo.conforming._build import install
from properties.zoo.conforming._ops import dot_f64, op_functions

install(globals(), "gpu_impl.ops", {**op_functions(F64, dot_f64),
                                    **attention_functions(make_attention(tile=1 << 30, acc=np.float64))})
