"""What the default contract does not accept from Metal, by derivation (docs/judge.md): fast
math's sin / cos, documented within 2^-13 absolute on [-π, π] only, and fast math's tanh, defined
as (t - 1) / (t + 1) of t = exp(2x) with no relative bound near 0. RoPE and softcap written as the
conforming ``metal_fast_math`` member writes them but calling these instead of the precise
functions are flagged; the member itself passes (``test_calibration_zoos``)."""
from __future__ import annotations

import numpy as np

from properties.zoo.conforming._arith import F32, off_by
from properties.zoo.conforming._metal import fast_divide, fast_exp
from properties.zoo.conforming._rope import make_rope
from properties.zoo.conforming.metal_fast_math.ops import mlx_table
from properties.zoo.ops import DOMAIN
from properties.zoo.runner import Mutant, assert_property_kill, hunt, replaced, swapped

FAST_SINCOS_ABS = 2.0 ** -13


def fast_sincos(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """fast::sin / cos at the documented 2^-13 of the range where one is documented, away from 0."""
    th = np.asarray(theta, F32).astype(np.float64)
    s, c = np.sin(th), np.cos(th)
    return off_by(s, np.sign(s) * FAST_SINCOS_ABS), off_by(c, np.sign(c) * FAST_SINCOS_ABS)


def fast_tanh(x: np.ndarray) -> np.ndarray:
    """fast::tanh as Table 8.2 defines it: (t - 1) / (t + 1), t = fast::exp(2x), fast division."""
    t = fast_exp((F32(2) * np.asarray(x, F32)).astype(F32))
    with np.errstate(invalid="ignore"):
        return np.where(np.isinf(t), F32(1), fast_divide((t - F32(1)).astype(F32), (t + F32(1)).astype(F32)))


def _softcap(x, cap):
    c = F32(cap)
    return (c * fast_tanh((np.asarray(x, F32) / c).astype(F32))).astype(F32)


def _killed(name: str, replaces: str, **functions) -> str:
    mutant = Mutant(name, name, frozenset({replaces}), replaced(lambda base: swapped(base, name, **functions)))
    kill = hunt(mutant, DOMAIN, budget=60).first_kill
    assert kill is not None, f"{name} passed the default contract"
    assert_property_kill(name, kill)
    return kill.property


def test_rope_with_fast_sincos_is_flagged() -> None:
    killed_by = _killed("metal_rope_fast_sincos", "rope", rope=make_rope(mlx_table, fast_sincos))
    assert killed_by == "impl_vs_oracle[rope]/float32"


def test_softcap_with_fast_tanh_is_flagged() -> None:
    killed_by = _killed("metal_softcap_fast_tanh", "softcap", softcap=_softcap)
    assert killed_by == "impl_vs_oracle[softcap]/float32"
