"""The legal ways to compute e^d of a float32 argument, each with its error in u.

Exponentials (``ExpForm``, ``exp_u``). Engines compute e^d of a float32 argument d = fl(l - max)
in more than one legal way, and the contract says which: ``expf`` (2 ulp); ``exp2f`` of the
prescaled argument fl(d·fl(log2 e)) (the product's rounding and the constant's, 1.2235 u·|d|,
then exp2f's 2 ulp); and the fast-math intrinsic ``__expf`` (``-use_fast_math``, FlashInfer's
sampling kernels, ggml-CUDA's fast-math builds: ex2.approx of x·log2e), CUDA's documented
2 + 1.173·|x| ulp. The default contract accepts all three (the engines behind this suite's
users ship fast-math kernels); strict demands an exp within expf's 2 ulp of e^d at the rounded
argument (a prescaled exp2f fails it where |d| > ~3: strict is the accurate tier). Every check that judges p_i/p_max, a log-softmax, attention's
softmax or a sampler window takes its exp error from ``exp_u``. Metal's fast-math ``exp`` is not
modelled (its bound is not verified here): a Metal engine built with fast math may see red.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .units import FN_U, U32

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
EXP_FORMS = (EXPF, EXP2F_PRESCALED, FAST_EXPF)
