"""A CUDA engine in ggml-CUDA's shape: a block of up to 1,024 threads per row, each summing a
strided slice in order, a warp shuffle tree and a shared-memory tree, then ``e · (1/s)``;
cumulative masses by a block scan (thread-local runs, Kogge-Stone across threads); dist as a
float32 inverse CDF of the normalised probabilities; top_k by a sort whose ties put the higher
id first. Like any kernel that avoids a host sync, it never inspects its input for NaN/+inf."""
from properties.zoo.conforming._arith import BLOCK
from properties.zoo.conforming._build import install
from properties.zoo.conforming._samplers import Choices, sampler_functions

install(globals(), "gpu_impl", sampler_functions(BLOCK, Choices(lowest_id_first=False, validate=False)))
