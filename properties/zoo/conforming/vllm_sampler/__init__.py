"""vLLM's sampler arithmetic (torch float32, batched) as the engine: see
``properties.zoo.conforming._vllm``."""
from properties.zoo.conforming._build import install
from properties.zoo.conforming._vllm import SAMPLERS

install(globals(), "gpu_impl", SAMPLERS)
