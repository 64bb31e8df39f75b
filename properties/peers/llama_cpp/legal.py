"""The sampler-specific half of the judge: what llama.cpp may return for one ``apply``.

``legal_for(oracle_sampler, cur_in, drift)`` applies the oracle (advancing its state, exactly as
llama.cpp's sampler advances) and describes every legal llama.cpp answer. The allowances are
the float32 error model of ``properties.numerics`` (a peer's known float32 loops) applied to the arithmetic llama.cpp does in float:

- exact (no allowance): greedy, temp (one correctly rounded division; the oracle's float64
  quotient rounds to the same float, 53 >= 2·24 + 2), logit_bias with distinct tokens, top_k,
  every "untouched" logit or p, every RNG draw, XTC's chance, the selection rule given the array;
- cumulative mass (top_p >=, typical >, XTC's p >= threshold, mirostat-v2's surprise > mu):
  the decision may flip within the running-error bound of the float softmax and float prefix sum;
- thresholds on logits (min_p, top_n_sigma): within the rounding of max + logf(p) and of the
  float mean/std;
- ties: equal keys are interchangeable (llama.cpp's sorts are unstable: ``properties.ties``, the one
  definition); typical's float scores are interchangeable within their error bound;
- p: within max(1e-6, the float model's bound), per entry;
- state that llama.cpp keeps in float (mirostat's mu, adaptive-p's EMA) drifts by the bound
  ``Drift`` accumulates step by step.
"""
from __future__ import annotations

import copy

import numpy as np

from oracle.candidates import TokenDataArray
from oracle.samplers.base import Sampler
from properties.peers.legality import FindingDomain, Legal, Unsupported
from properties.peers.llama_cpp.legal_filters import _identity
from properties.peers.llama_cpp.legal_select import Drift
from properties.samplers.records import BY_LLAMA_NAME

__all__ = ["Drift", "legal_for", "BUCKET_OVERFLOW"]

# llama.cpp's bucket sort computes int(6.4f·logit + 64): from here on the conversion overflows
# (x86-64: INT_MIN, clamped to the lowest bucket), so such a token sorts as the smallest
BUCKET_OVERFLOW = 3.3e8


def legal_for(smp: Sampler, cur_in: TokenDataArray, drift: Drift) -> Legal:
    if cur_in.size == 0 or not np.isfinite(cur_in.logits).any():
        raise Unsupported("no finite candidate (llama.cpp's answers there are findings, not semantics)")
    record = None if smp.name.startswith("?") else BY_LLAMA_NAME[smp.name]  # "?name": a disabled sampler
    # llama.cpp's top_k with k <= 128 uses std::partial_sort, not the bucket sort
    sorts = record is not None and record.llama.sorts and not (record.name == "top_k" and smp.k <= 128)
    if sorts and not cur_in.sorted and cur_in.size > 128 and cur_in.logits.max() >= BUCKET_OVERFLOW:
        raise FindingDomain("bucket-sort-int-overflow")
    pre = copy.deepcopy(smp)
    if sorts and not cur_in.sorted:
        cur_in.descending()  # computed once here, shared by the oracle's copy and the builder
    out = cur_in.copy()
    smp.apply(out)
    build = _identity if record is None else record.llama.legal
    legal = build(pre, cur_in, out, drift)
    legal.oracle = out
    return legal
