"""Every llama.cpp sampler; factory names and parameters mirror ``llama_sampler_init_*``."""
from oracle.samplers.base import Empty, Sampler
from oracle.samplers.dry import dry
from oracle.samplers.mirostat import adaptive_p, mirostat, mirostat_v2
from oracle.samplers.penalties import logit_bias, penalties
from oracle.samplers.selection import dist, greedy
from oracle.samplers.temperature import temp, temp_ext
from oracle.samplers.truncation import min_p, top_k, top_n_sigma, top_p, typical
from oracle.samplers.xtc import xtc

__all__ = [
    "Sampler", "Empty", "greedy", "dist", "temp", "temp_ext", "top_k", "top_p", "min_p", "typical",
    "xtc", "top_n_sigma", "penalties", "dry", "logit_bias", "mirostat", "mirostat_v2", "adaptive_p",
]
