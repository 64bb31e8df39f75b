"""The legal ways to compute e^d of a float32 argument, each with its error in u.

Exponentials (``ExpForm``, ``exp_u``). Engines compute e^d of a float32 argument d = fl(l - max)
in more than one legal way, and the contract says which: ``expf`` (2 ulp); ``exp2f`` of the
prescaled argument fl(d·fl(log2 e)) (the product's rounding and the constant's, 1.2235 u·|d|,
then exp2f's 2 ulp); and the fast-math intrinsic ``__expf`` (``-use_fast_math``, FlashInfer's
sampling kernels, ggml-CUDA's fast-math builds: ex2.approx of x·log2e), CUDA's documented
2 + 1.173·|x| ulp. The default contract accepts all three (the engines behind this suite's
users ship fast-math kernels); strict demands an exp within expf's 2 ulp of e^d at the rounded
argument (a prescaled exp2f fails it where |d| > ~3: strict is the accurate tier). Every check that judges p_i/p_max, a log-softmax, attention's
softmax or a sampler window takes its exp error from ``exp_u``.

Metal (the Metal Shading Language specification 4.1, §8.4): the compiler's default mode is fast
math (Table 8.2; ggml-metal builds its library so), where exp and exp2 are within
3 + floor(|2x|) ulp, so 6 u + 4 u·|d| for ``fast::exp`` (MLX's softmax, logsumexp and
decode attention call it explicitly) and 1.2235 u·|d| + 6 u + 4 u·|t| (t = d·log2 e) for
``fast::exp2`` of a prescaled argument (MLX's prefill attention); ``-fno-fast-math`` and
``metal::precise`` give 4 ulp (Table 8.1), 8 u. The default contract accepts these too (a Metal
engine built the default way is correct code); strict does not. ``EXP2_FORMS`` are the same
bounds for 2^t at its own argument t (a pow computed as exp2(y·log2 x)).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .units import FN_U, METAL_FN_U, U32

LOG2E = 1.4426950408889634
LOG2E_F32_REL_U = abs(float(np.float32(LOG2E)) - LOG2E) / LOG2E / U32
"""fl(log2 e)'s relative error in u (0.2235): it scales every prescaled argument."""


@dataclass(frozen=True)
class ExpForm:
    """One legal way to compute e^d for a float32 argument d, with its relative error in units of
    u: ``slope``·|d| + ``const``. The rounding of d itself (u·|d|) is the caller's to count."""
    name: str
    slope: float
    const: float
    source: str

    def u(self, d: Any) -> Any:
        return self.slope * np.abs(d) + self.const


EXPF = ExpForm("expf", 0.0, FN_U["exp"], "expf: CUDA's documented 2 ulp (glibc's is below 1 ulp)")
EXP2F_PRESCALED = ExpForm(
    "exp2f(d·log2e)", 1.0 + LOG2E_F32_REL_U, FN_U["exp"],
    "t = fl(d·fl(log2 e)): the product's rounding moves 2^t by u·|d| and the constant's by 0.2235 u·|d|; "
    "exp2f: 2 ulp")
FAST_EXPF = ExpForm(
    "__expf", 2 * 1.173, 4.0,
    "CUDA's __expf (-use_fast_math; ex2.approx.ftz of x·log2e, FlashInfer's ptx_exp2 path): documented "
    "2 + floor(|1.173·x|) ulp, 1 ulp <= 2u")
METAL_EXP = ExpForm("metal::exp", 0.0, METAL_FN_U["exp"], "Metal's precise exp (MSL 4.1 Table 8.1, -fno-fast-math): 4 ulp")
METAL_FAST_EXP = ExpForm(
    "metal::fast::exp", 4.0, 6.0,
    "Metal's fast-math exp (MSL 4.1 Table 8.2, the compiler's default mode): 3 + floor(|2x|) ulp")

EXP2F = ExpForm("exp2f", 0.0, FN_U["exp"], "exp2f / ex2.approx: 2 ulp, at the argument t of 2^t")
METAL_EXP2 = ExpForm("metal::exp2", 0.0, METAL_FN_U["exp"], "Metal's precise exp2 (MSL 4.1 Table 8.1): 4 ulp")
METAL_FAST_EXP2 = ExpForm("metal::fast::exp2", 4.0, 6.0,
                          "Metal's fast-math exp2 (MSL 4.1 Table 8.2): 3 + floor(|2t|) ulp at t")
EXP2_FORMS = (EXP2F, METAL_EXP2, METAL_FAST_EXP2)
"""2^t at its own argument t (slope per |t|): what a pow computed as exp2(y·log2 x) carries."""

METAL_FAST_EXP2_PRESCALED = ExpForm(
    "metal::fast::exp2(d·log2e)", 1.0 + LOG2E_F32_REL_U + METAL_FAST_EXP2.slope * LOG2E, METAL_FAST_EXP2.const,
    "t = fl(d·fl(log2 e)) (1.2235 u·|d|), then fast::exp2's 3 + floor(|2t|) ulp: MLX's prefill attention")
EXP_FORMS = (EXPF, EXP2F_PRESCALED, FAST_EXPF, METAL_EXP, METAL_FAST_EXP, METAL_FAST_EXP2_PRESCALED)
