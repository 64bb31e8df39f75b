"""A Metal engine built the way ggml-metal's library is (fast math, the Metal compiler's default)
and calling what MLX calls by name: ``fast::exp`` (3 + floor(|2d|) ulp, Metal Shading Language
specification 4.1, Table 8.2) in softmax and the samplers, ``fast::log`` (2^-21 near 1, 3 ulp
elsewhere) for typical's logs, 1.0 / s within 1 ulp and temp's l / t within 2.5 ulp, each at its
documented worst; 32-lane SIMD and threadgroup trees for sums, block scans, a float32 inverse CDF.
Correct code: the default contract must accept it; ``--contract strict`` does not."""
from properties.zoo.conforming._build import install
from properties.zoo.conforming._metal import METAL
from properties.zoo.conforming._samplers import Choices, sampler_functions

install(globals(), "gpu_impl", sampler_functions(METAL, Choices(lowest_id_first=False, validate=False)))
