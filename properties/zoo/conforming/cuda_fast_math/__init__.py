"""A CUDA engine built the way FlashInfer's sampling kernels and ``-use_fast_math`` builds are:
``__expf`` (ex2.approx of fl(d·log2 e), one ulp off, subnormals flushed) for every exponential,
``__logf`` for typical's logs (3 ulp, 2^-21.41 near 1), temp's l / t by ``-prec-div=false``'s division (2 ulp off the quotient, its documented worst),
1,024-thread block sums, ``e · (1.0f / s)`` with that division's reciprocal, block scans and a float32 inverse CDF for dist. Correct
code: the default contract must accept it; ``--contract strict`` (expf-accurate exponentials,
IEEE division) does not."""
from properties.zoo.conforming._arith import FAST_MATH
from properties.zoo.conforming._build import install
from properties.zoo.conforming._samplers import Choices, sampler_functions

install(globals(), "gpu_impl", sampler_functions(FAST_MATH, Choices(lowest_id_first=False, validate=False)))
