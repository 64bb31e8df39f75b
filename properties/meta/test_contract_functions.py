"""The contracts' elementary-function allowances are the documented bounds they cite: strict holds
CUDA's accurate functions (expf, IEEE division, logf's 1 ulp); the default takes, per function,
the widest of those, CUDA's -use_fast_math intrinsics and Metal's two tables (MSL 4.1 §8.4)."""
from __future__ import annotations

import math

import numpy as np

from properties import numerics as n

D = np.linspace(-40.0, 40.0, 801)


def test_strict_is_cudas_accurate_functions() -> None:
    s = n.STRICT
    assert dict(s.fn) == n.FN_U
    assert np.all(s.exp_u(D) == n.FN_U["exp"]) and np.all(s.exp2_u(D) == n.FN_U["exp"])
    assert (s.quotient_u, s.log_u, s.log_abs_u) == (2.0, n.FN_U["log"], 0.0)


def test_default_takes_every_documented_form() -> None:
    c = n.DEFAULT
    for f, u in n.FN_U.items():
        assert c.fn_u(f) == max(u, n.METAL_FN_U.get(f, 0.0))
    for form in (n.EXPF, n.EXP2F_PRESCALED, n.FAST_EXPF, n.METAL_EXP, n.METAL_FAST_EXP, n.METAL_FAST_EXP2_PRESCALED):
        assert np.all(c.exp_u(D) >= form.u(D)), form.name
    for form in (n.EXP2F, n.METAL_FAST_EXP2):
        assert np.all(c.exp2_u(D) >= form.u(D)), form.name
    assert c.quotient_u >= 1 + 2 * 2.5  # the parameter's rounding and Metal's 2.5-ulp x / y
    assert c.log_u >= 2 * 4 and c.log_abs_u >= n.METAL_FAST_LOG_ABS / n.U32  # 4 ulp; 2^-21 near 1


def test_metal_fast_exp_is_its_table_row() -> None:
    """3 + floor(|2x|) ulp, 1 ulp <= 2u: 6 u + 4 u·|x| bounds it, tight at integer 2x."""
    ulps = 3 + np.floor(np.abs(2 * D))
    assert np.all(2 * ulps <= n.METAL_FAST_EXP.u(D))
    assert np.allclose((2 * ulps)[D == np.round(D)], n.METAL_FAST_EXP.u(D)[D == np.round(D)])


def test_pow_of_zero_exponent_is_exact_and_positive_otherwise() -> None:
    ln_x = -2 * math.log(1e4) / 128
    assert n.pow_u(ln_x, 0) == 0.0
    assert all(n.pow_u(ln_x, i, c) >= c.fn_u("pow") for c in (n.DEFAULT, n.STRICT) for i in (1, 10, 63))
