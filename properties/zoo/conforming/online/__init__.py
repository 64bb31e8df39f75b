"""Online softmax (FlashInfer / vLLM sampling kernels): the normaliser in one pass over 256-wide
tiles with a running max, the sum rescaled by ``exp(m_old - m_new)`` when the max grows; block
scans for cumulative masses; a reciprocal multiply."""
from properties.zoo.conforming._arith import ONLINE
from properties.zoo.conforming._build import install
from properties.zoo.conforming._samplers import Choices, sampler_functions

install(globals(), "gpu_impl", sampler_functions(ONLINE, Choices()))
