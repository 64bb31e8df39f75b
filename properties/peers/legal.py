"""The sampler-specific half of the judge: what llama.cpp may return for one ``apply``.

``legal_for(oracle_sampler, cur_in, drift)`` applies the oracle (advancing its state, exactly as
llama.cpp's sampler advances) and describes every legal llama.cpp answer. The allowances are
the float32 error model of ``float_model`` applied to the arithmetic llama.cpp does in float:

- exact (no allowance): greedy, temp (one correctly rounded division; the oracle's float64
  quotient rounds to the same float, 53 >= 2·24 + 2), logit_bias with distinct tokens, top_k,
  every "untouched" logit or p, every RNG draw, XTC's chance, the selection rule given the array;
- cumulative mass (top_p >=, typical >, XTC's p >= threshold, mirostat-v2's surprise > mu):
  the decision may flip within the running-error bound of the float softmax and float prefix sum;
- thresholds on logits (min_p, top_n_sigma): within the rounding of max + logf(p) and of the
  float mean/std;
- ties: equal keys are interchangeable (llama.cpp's sorts are unstable); typical's float scores
  are interchangeable within their error bound;
- p: within max(1e-6, the float model's bound), per entry;
- state that llama.cpp keeps in float (mirostat's mu, adaptive-p's EMA) drifts by the bound
  ``Drift`` accumulates step by step.
"""
from __future__ import annotations

import copy

import numpy as np

from oracle.candidates import TokenDataArray
from oracle.samplers.base import Sampler
from properties.peers.judge import FindingDomain, Legal, Unsupported
from properties.peers.legal_filters import (_logit_bias, _dry_tol, _greedy, _identity, _min_p, _penalty_tol, _temp_ext,
                                            _top_k, _top_n_sigma, _top_p, _transform, _typical, _xtc)
from properties.peers.legal_select import Drift, _adaptive_p, _dist, _mirostat, _mirostat_v2

__all__ = ["Drift", "legal_for", "BUCKET_OVERFLOW"]

# llama.cpp's bucket sort computes int(6.4f·logit + 64): from here on the conversion overflows
# (x86-64: INT_MIN, clamped to the lowest bucket), so such a token sorts as the smallest
BUCKET_OVERFLOW = 3.3e8
_SORTS = {"top-k", "top-p", "min-p", "typical", "xtc", "temp-ext", "mirostat", "mirostat-v2"}


def legal_for(smp: Sampler, cur_in: TokenDataArray, drift: Drift) -> Legal:
    if cur_in.size == 0 or not np.isfinite(cur_in.logits).any():
        raise Unsupported("no finite candidate (llama.cpp's answers there are findings, not semantics)")
    sorts = smp.name in _SORTS and not (smp.name == "top-k" and smp.k <= 128)  # top_k <= 128: std::partial_sort
    if sorts and not cur_in.sorted and cur_in.size > 128 and cur_in.logits.max() >= BUCKET_OVERFLOW:
        raise FindingDomain("bucket-sort-int-overflow")
    pre = copy.deepcopy(smp)
    if sorts and not cur_in.sorted:
        cur_in.descending()  # computed once here, shared by the oracle's copy and the builder
    out = cur_in.copy()
    smp.apply(out)
    build = _identity if smp.name.startswith("?") else _BUILDERS[smp.name]
    legal = build(pre, cur_in, out, drift)
    legal.oracle = out
    return legal


_BUILDERS = {
    "greedy": _greedy, "dist": _dist, "temp": _transform(), "temp-ext": _temp_ext, "top-k": _top_k,
    "top-p": _top_p, "min-p": _min_p, "typical": _typical, "xtc": _xtc, "top-n-sigma": _top_n_sigma,
    "penalties": _transform(_penalty_tol), "dry": _transform(_dry_tol), "logit-bias": _logit_bias,
    "mirostat": _mirostat, "mirostat-v2": _mirostat_v2, "adaptive-p": _adaptive_p,
}
