"""The conforming-implementations zoo: correct engines written the way engines write them.

Each member is a package with gpu_impl's API (``properties.zoo.conforming.<name>``, gpu_impl
with the functions in ``REPLACED`` swapped for the engine's own) and an ``.ops`` sub-module with
gpu_impl.ops' API. Every member must pass the default contract of every property of the domains
it replaces: a failure is a false alarm of the judge, tabulated by
``python -m properties.zoo.calibration``. They run on NumPy (and torch's CPU) only.
"""
from __future__ import annotations

MEMBERS: dict[str, str] = {
    "llama_cpp_cpu": "llama.cpp's C++ samplers: float sums in token / sorted order, divide, unstable "
                     "partial sort, double dist; ops as plain CPU loops, ggml-CPU SIMD dot, one-key flash attention",
    "cuda_block": "ggml-CUDA shape: 1,024-thread strided sums + warp/shared trees, reciprocal multiply, "
                  "block scans, float32 inverse CDF, no input inspection; rsqrt norms, Welford, split-K, 64-key tiles",
    "online": "one-pass online softmax (rescaled running sum over 256-wide tiles); flash attention, 16-key tiles",
    "torch_cpu": "PyTorch CPU float32: HF-warper arithmetic (torch.sort/cumsum/log_softmax, min_p on "
                 "probabilities); torch.nn.functional ops, eager attention",
    "kahan": "compensated (Kahan + TwoSum tree) normalisers, entropies, scans, norm sums and dots",
    "float64_accum": "double accumulators, rounded once (ggml-CPU's ggml_float); min_p on probabilities",
    "cuda_fast_math": "FlashInfer / -use_fast_math CUDA: __expf (ex2.approx of fl(d·log2e), one ulp off, FTZ) in "
                      "softmax, samplers, log-softmax and 64-key flash attention; temp's l / t and every 1.0f / s "
                      "2 ulp off (-prec-div=false), rsqrtf 2 ulp off, __logf at its documented worst; block sums and scans",
    "metal_fast_math": "Metal at its documented worst (MSL 4.1 Tables 8.1 / 8.2): fast::exp (3 + floor(|2d|) ulp) in "
                       "softmax and samplers, fast::log, 1.0 / s 1 ulp and l / t 2.5 ulp off; fast::exp2 of prescaled "
                       "scores in 32-key attention; precise exp2 / sin / cos RoPE, precise tanh GELU and softcap",
    "hf_warpers": "transformers' own TopP / MinP / Temperature warpers on float32 torch rows (ascending sort, "
                  "cum <= 1 - p, min_keep by torch.topk of probabilities), torch.argmax greedy; samplers only",
    "vllm_sampler": "vLLM's sampler arithmetic in torch float32: ascending sort + float32 1 - p mask, min_p on "
                    "probabilities, torch.topk top_k, div_ temperature, argmax; samplers only",
}
