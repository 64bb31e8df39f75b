"""logitcheck's oracle: the float64 NumPy specification of every sampler and op.

Sampler semantics are llama.cpp's (``llama_sampler_init_*``); engine variants are named
explicitly. This package never imports ``gpu_impl``: the judge must not share code with the
thing it judges.
"""
from oracle.candidates import TokenDataArray
from oracle.rng import LLAMA_DEFAULT_SEED, Mt19937

__all__ = ["TokenDataArray", "Mt19937", "LLAMA_DEFAULT_SEED"]
