"""The conforming zoo's model of CUDA's fast-math intrinsics (``fast_exp``, ``fast_divide``,
``fast_rsqrt``, ``fast_log``: each at its documented worst, or one ulp off for the exponential;
``fast_sincos``: an assumed range reduction)
passes the premise checks a device run applies to the real ones
(``properties.gpu.fast_math_premises``), and intrinsics one step past a premise fail them: a
device failure is then the device's, not a bug in the check."""
from __future__ import annotations

from typing import Callable

import numpy as np
import pytest

from properties.gpu.fast_math_premises import CHECKS, Measured, inputs
from properties.numerics.exponentials import FAST_EXPF
from properties.numerics.units import U32
from properties.zoo.conforming._arith import F32, fast_divide, fast_exp, fast_log, fast_rsqrt
from properties.zoo.conforming._rope import fast_sincos


def modelled() -> Measured:
    x, y = inputs()
    with np.errstate(invalid="ignore"):
        sn, cs = fast_sincos(y)
    return {"x": x, "y": y, "ex": fast_exp(x), "ex2": np.exp2(x.astype(np.float64)).astype(np.float32),
            "q": fast_divide(x, y), "rcp": fast_divide(F32(1), y), "rs": fast_rsqrt(y), "lg": fast_log(y),
            "sn": sn, "cs": cs}


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_checks_pass_the_modelled_intrinsics(check: Callable[[Measured], None]) -> None:
    check(modelled())


def _away(a: np.ndarray) -> np.ndarray:
    return np.nextafter(a, np.copysign(np.float32(np.inf), a)).astype(np.float32)


def _log_two_ulp_further(m: Measured) -> np.ndarray:
    """__logf two more ulp from ln y outside [0.5, 2], where the model already sits 3 ulp off:
    5 ulp, one past the contract's 4 (Metal's precise log)."""
    further = np.where(m["lg"] >= np.log(m["y"].astype(np.float64)), np.float32(np.inf), np.float32(-np.inf))
    near = (m["y"] >= 0.5) & (m["y"] <= 2)
    return np.where(near, m["lg"], np.nextafter(np.nextafter(m["lg"], further), further)).astype(np.float32)


PAST: dict[str, tuple[str, Callable[[Measured], np.ndarray]]] = {
    "expf(0) below 1": ("ex", lambda m: np.where(m["x"] == 0, np.float32(1 - 2 ** -24), m["ex"]).astype(np.float32)),
    "expf a u past its bound": ("ex", lambda m: np.where(
        m["x"] == np.floor(m["x"]), m["ex"],
        (np.exp(m["x"].astype(np.float64)) * (1 + (FAST_EXPF.u(m["x"]) + 1.01) * U32)).astype(np.float32))),
    "division 3 ulp off": ("q", lambda m: _away(m["q"])),
    "rsqrtf 3 ulp off": ("rs", lambda m: _away(m["rs"])),
    "1.0f / 2^-93 one ulp low": ("rcp", lambda m: np.where(np.arange(m["y"].size) == 7, np.nextafter(m["rcp"], 0),
                                                           m["rcp"]).astype(np.float32)),
    "logf 5 ulp off": ("lg", _log_two_ulp_further),
    "sinf from an angle reduced 4 u off": ("sn", lambda m: np.sin(m["y"].astype(np.float64) * (1 + 4 * U32)).astype(np.float32)),
}


@pytest.mark.parametrize("name", list(PAST))
def test_checks_fail_one_step_past_a_premise(name: str) -> None:
    field, past = PAST[name]
    m = modelled()
    m[field] = past(m)
    failed = []
    for check in CHECKS:
        try:
            check(m)
        except AssertionError:
            failed.append(check.__name__)
    assert failed, f"{name}: every premise check passed"
