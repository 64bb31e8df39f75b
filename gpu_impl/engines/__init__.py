"""Engine variants on fixed-shape [B, V] rows (NumPy or CuPy), written independently of
``oracle.engines``: transformers' warpers, vLLM's chain and exponential race (also with
per-request seeds, ``vllm_sample_seeded``: -1 = unseeded), mistral.rs' zeroing truncation and
WeightedIndex, candle's Gumbel-max with supplied noise, and llama.cpp's default chain composed
from gpu_impl's own samplers."""
from gpu_impl.engines.candle import candle_repeat_penalty, candle_sample
from gpu_impl.engines.llama_cpp import llama_cpp_chain, llama_cpp_chain_dist
from gpu_impl.engines.logprobs import logprobs_of, logprobs_top_n
from gpu_impl.engines.seeded import vllm_sample_seeded
from gpu_impl.engines.mistralrs import mistralrs_sample, mistralrs_weights
from gpu_impl.engines.transformers import (hf_chain, hf_epsilon, hf_eta, hf_min_p, hf_repetition_penalty,
                                           hf_temperature, hf_top_k, hf_top_p, hf_typical)
from gpu_impl.engines.vllm import vllm_chain, vllm_min_p, vllm_penalties, vllm_sample, vllm_top_k_top_p
from gpu_impl.softmax import softmax

__all__ = ["hf_temperature", "hf_top_k", "hf_top_p", "hf_min_p", "hf_typical", "hf_epsilon", "hf_eta",
           "hf_repetition_penalty", "hf_chain", "vllm_penalties", "vllm_min_p", "vllm_top_k_top_p", "vllm_chain",
           "vllm_sample", "vllm_sample_seeded", "mistralrs_weights", "mistralrs_sample", "candle_repeat_penalty",
           "candle_sample", "llama_cpp_chain", "llama_cpp_chain_dist", "softmax", "logprobs_top_n", "logprobs_of"]
