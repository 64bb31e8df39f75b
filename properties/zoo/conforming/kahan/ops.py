"""Compensated reductions for softmax, log_softmax, rms_norm and layer_norm; a Kahan dot for
matmul (products rounded to float32, their sum compensated)."""
from properties.zoo.conforming._arith import KAHAN
from properties.zoo.conforming._build import install
from properties.zoo.conforming._ops import dot_kahan, op_functions

install(globals(), "gpu_impl.ops", op_functions(KAHAN, dot_kahan))
