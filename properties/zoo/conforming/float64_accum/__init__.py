"""float32 storage and expf, double accumulators (ggml-CPU's ``ggml_float`` sums): the softmax
normaliser, entropy and cumulative masses are summed in double and rounded once; dist is a
float32 inverse CDF of probabilities cumulated in double; min_p on probabilities."""
from properties.zoo.conforming._arith import F64
from properties.zoo.conforming._build import install
from properties.zoo.conforming._samplers import Choices, sampler_functions

install(globals(), "gpu_impl", sampler_functions(F64, Choices(), min_p_on_probs=True))
