"""Online-softmax ops: softmax / log_softmax with a one-pass rescaled normaliser; attention as
flash attention over 16-key tiles. Norms and matmul are gpu_impl's."""
from properties.zoo.conforming._arith import ONLINE
from properties.zoo.conforming._attention import attention_functions, make_attention
from properties.zoo.conforming._build import install
from properties.zoo.conforming._ops import make_log_softmax, make_softmax

install(globals(), "gpu_impl.ops", {"softmax": make_softmax(ONLINE), "log_softmax": make_log_softmax(ONLINE),
                                    **attention_functions(make_attention(tile=16, reciprocal=True))})
