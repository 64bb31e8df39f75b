"""The default contract's fast-math premises, measured on the device they describe.

The judge accepts what ``-use_fast_math`` CUDA does, from the CUDA programming guide's table of
maximum ulp errors: ``__expf`` within 2 + 1.173·|x| ulp (``numerics.exponentials.FAST_EXPF``),
``x / y`` and ``1.0f / y`` within 2 ulp under ``-prec-div=false`` (``Contract.quotient_u``),
``rsqrtf`` within 2 ulp (the ops' norm models), ``__logf`` within 3 ulp, 2^-21.41 absolute on
[0.5, 2] (``Contract.log_u``, ``log_abs_u``). It also assumes what the guide does not state
and the exact-boundary tests and the conforming zoo's ``fast_exp`` rely on: the approximate
exponential is exact at integer powers of two (``__expf(0) = 1``, so uniform rows have exact
masses) and an approximate reciprocal of a power of two is exact.

These run only where a CUDA device is usable (``logitcheck device-check`` runs them); without
one they are skipped, and the figures wait for the next device run. Inputs are fixed (seed 0).
"""
from __future__ import annotations

import numpy as np
import pytest

from properties.backends import cupy_device_reason, cupy_or_none
from properties.numerics.contracts import DEFAULT
from properties.numerics.exponentials import FAST_EXPF
from properties.numerics.units import U32

SOURCE = r"""
extern "C" __global__ void fast_math_premises(const float* x, const float* y, float* ex, float* ex2,
                                              float* q, float* rcp, float* rs, float* lg, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        ex[i] = __expf(x[i]);
        ex2[i] = exp2f(x[i]);   // ex2.approx.ftz under -use_fast_math
        q[i] = x[i] / y[i];     // div.approx / div.full under -prec-div=false
        rcp[i] = 1.0f / y[i];
        rs[i] = rsqrtf(y[i]);
        lg[i] = logf(y[i]);     // __logf under -use_fast_math
    }
}
"""
N = 1 << 16
LOGF_ABS_NEAR_ONE = 2.0 ** -21.41


def _inputs() -> tuple[np.ndarray, np.ndarray]:
    """x: exponents d in [-87, 0] (e^d stays normal) with 0 and integers among them; y: divisors
    spread over [2^-100, 2^100] (inside the guide's [2^-126, 2^126]) with exact powers of two."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-87.0, 0.0, N).astype(np.float32)
    x[:128] = -(np.arange(128) % 88)
    y = np.exp2(rng.uniform(-100.0, 100.0, N)).astype(np.float32)
    y[:201] = np.exp2(np.arange(-100, 101)).astype(np.float32)
    return x, y


@pytest.fixture(scope="module")
def measured() -> dict[str, np.ndarray]:
    if cupy_device_reason() is not None:
        pytest.skip(f"no CUDA device: {cupy_device_reason()}")
    cp = cupy_or_none()
    kernel = cp.RawModule(code=SOURCE, options=("--use_fast_math",)).get_function("fast_math_premises")
    x, y = _inputs()
    dx, dy = cp.asarray(x), cp.asarray(y)
    out = {k: cp.empty(N, cp.float32) for k in ("ex", "ex2", "q", "rcp", "rs", "lg")}
    kernel(((N + 255) // 256,), (256,), (dx, dy, out["ex"], out["ex2"], out["q"], out["rcp"], out["rs"], out["lg"],
                                               np.int32(N)))
    return {"x": x, "y": y, **{k: cp.asnumpy(v) for k, v in out.items()}}


def _ulp(exact: np.ndarray) -> np.ndarray:
    """The float32 spacing at the exact value: of the binade it lies in (rounding it to float32
    first could carry it into the next binade, of twice the spacing)."""
    a = np.abs(exact)
    r = a.astype(np.float32)
    r = np.where(r.astype(np.float64) > a, np.nextafter(r, np.float32(0)), r)
    return np.spacing(r).astype(np.float64)


def _ulps(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|got - exact| in float32 ulps of the exact value."""
    return np.abs(got.astype(np.float64) - exact) / _ulp(exact)


def check_exact_powers(m: dict[str, np.ndarray]) -> None:
    """__expf(0) = 1, exp2f(k) = 2^k and 1.0f / 2^k = 2^-k exactly."""
    assert m["ex"][0] == 1.0, f"__expf(0) = {m['ex'][0]!r}"
    x, y = m["x"][:128].astype(np.float64), m["y"][:201].astype(np.float64)
    assert np.array_equal(m["ex2"][:128], np.exp2(x).astype(np.float32)), "exp2f inexact at an integer"
    assert np.array_equal(m["rcp"][:201], (1 / y).astype(np.float32)), "1.0f / 2^k inexact"


def check_fast_exp(m: dict[str, np.ndarray]) -> None:
    """__expf(d) within ``FAST_EXPF``'s relative error at every d."""
    d = m["x"].astype(np.float64)
    rel_u = np.abs(m["ex"].astype(np.float64) / np.exp(d) - 1) / U32
    worst = int(np.argmax(rel_u / FAST_EXPF.u(d)))
    assert rel_u[worst] <= FAST_EXPF.u(d[worst]), (
        f"__expf({d[worst]!r}): {rel_u[worst]:.3f} u against the model's {FAST_EXPF.u(d[worst]):.3f} u")


def check_two_ulp(m: dict[str, np.ndarray]) -> None:
    """x / y, 1.0f / y and rsqrtf(y) within 2 ulp of the exact values (normal results)."""
    x, y = m["x"].astype(np.float64), m["y"].astype(np.float64)
    for name, exact in (("q", x / y), ("rcp", 1 / y), ("rs", 1 / np.sqrt(y))):
        normal = np.abs(exact) >= np.finfo(np.float32).tiny
        err = _ulps(m[name][normal], exact[normal])
        assert err.max() <= 2.0, f"{name}: {err.max():.3f} ulp at y = {m['y'][normal][np.argmax(err)]!r}"


def check_fast_log(m: dict[str, np.ndarray]) -> None:
    """__logf(y) within the default contract's log: 2^-21.41 absolute for y in [0.5, 2], 3 ulp
    elsewhere (``Contract.log_abs_u``, ``log_u``: 6.02 u and 6 u of the result)."""
    y = m["y"].astype(np.float64)
    exact = np.log(y)
    near = (y >= 0.5) & (y <= 2)
    err = np.abs(m["lg"].astype(np.float64) - exact)
    allowed = np.where(near, LOGF_ABS_NEAR_ONE, 3 * _ulp(exact))
    worst = int(np.argmax(err / allowed))
    assert err[worst] <= allowed[worst], f"__logf({m['y'][worst]!r}): off by {err[worst]:.3e}, allowed {allowed[worst]:.3e}"
    model = (DEFAULT.log_u * np.abs(exact) + np.where(near, DEFAULT.log_abs_u, 0)) * U32
    assert (model >= allowed * (1 - 1e-9)).all(), "the contract's log model is narrower than the documented bound"


CHECKS = (check_exact_powers, check_fast_exp, check_two_ulp, check_fast_log)


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_device_meets_the_premise(measured, check):
    check(measured)


def _modelled() -> dict[str, np.ndarray]:
    """The conforming zoo's model of the intrinsics (each at its documented worst, or one ulp
    off for the exponential), on the same inputs."""
    from properties.zoo.conforming._arith import F32, fast_divide, fast_exp, fast_log, fast_rsqrt

    x, y = _inputs()
    with np.errstate(over="ignore"):
        ex2 = np.exp2(x.astype(np.float64)).astype(np.float32)
    return {"x": x, "y": y, "ex": fast_exp(x), "ex2": ex2, "q": fast_divide(x, y),
            "rcp": fast_divide(F32(1), y), "rs": fast_rsqrt(y), "lg": fast_log(y)}


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_checks_pass_the_modelled_intrinsics(check):
    """Without a device: the checks accept the zoo's legal model of the intrinsics, so a device
    failure is the device's, not a bug in the check."""
    check(_modelled())


@pytest.mark.parametrize("field, bad", [
    ("ex", lambda m: np.where(m["x"] == 0, np.float32(1 - 2 ** -24), m["ex"])),
    ("ex", lambda m: np.where(m["x"] == np.floor(m["x"]), m["ex"],  # e^d one u past the bound (+ rounding)
                              (np.exp(m["x"].astype(np.float64)) * (1 + (FAST_EXPF.u(m["x"]) + 1.01) * U32))
                              .astype(np.float32))),
    ("q", lambda m: np.nextafter(m["q"], np.copysign(np.float32(np.inf), m["q"]))),
    ("rs", lambda m: np.nextafter(m["rs"], np.float32(np.inf))),
    ("rcp", lambda m: np.where(np.arange(m["y"].size) == 7, np.nextafter(m["rcp"], 0), m["rcp"]).astype(np.float32)),
    ("lg", lambda m: np.where((m["y"] >= 0.5) & (m["y"] <= 2), m["lg"],
                              np.nextafter(m["lg"], np.where(m["lg"] >= np.log(m["y"]), np.float32(np.inf),
                                                             np.float32(-np.inf)))).astype(np.float32)),
], ids=["expf0", "expf_past_bound", "div_3ulp", "rsqrt_3ulp", "rcp_pow2", "logf_past_3ulp"])
def test_checks_fail_just_past_the_premise(field, bad):
    """...and reject an intrinsic one step past it."""
    m = _modelled()
    m[field] = bad(m)
    with pytest.raises(AssertionError):
        for check in CHECKS:
            check(m)
