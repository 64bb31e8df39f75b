"""The default contract's fast-math premises, as checks on what a device computed.

The judge accepts what ``-use_fast_math`` CUDA does, from the CUDA programming guide's table of
maximum ulp errors: ``__expf`` within 2 + 1.173·|x| ulp (``numerics.exponentials.FAST_EXPF``),
``x / y`` and ``1.0f / y`` within 2 ulp under ``-prec-div=false`` (``Contract.quotient_u``),
``rsqrtf`` within 2 ulp (the ops' norm models), ``__logf`` within 3 ulp and 2^-21.41 absolute
on [0.5, 2] (inside ``numerics.log_error_u``, which also takes Metal's 4-ulp log). It also assumes, for ``__sinf`` / ``__cosf`` outside
[-π, π] where the guide documents no bound, a range reduction within two roundings of the angle
(2u·|θ|, inside RoPE's 6 u·|θ|) plus the documented 2^-21.41; and it assumes what the guide does not state and the
exact-boundary tests and the conforming zoo's ``fast_exp`` rely on: the approximate exponential
is exact at integer powers of two (``__expf(0) = 1``, so uniform rows have exact masses) and an
approximate reciprocal of a power of two is exact.

``measure(cp)`` runs one kernel compiled with ``--use_fast_math`` on fixed inputs (seed 0);
each ``check_*`` raises AssertionError with the worst input where a premise fails.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from properties.numerics.contracts import DEFAULT, log_error_u
from properties.numerics.exponentials import FAST_EXPF
from properties.numerics.units import FAST_SINCOS_ABS, U32, ulp32

SOURCE = r"""
extern "C" __global__ void fast_math_premises(const float* x, const float* y, float* ex, float* ex2,
                                              float* q, float* rcp, float* rs, float* lg, float* sn,
                                              float* cs, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        ex[i] = __expf(x[i]);
        ex2[i] = exp2f(x[i]);   // ex2.approx.ftz under -use_fast_math
        q[i] = x[i] / y[i];     // div.approx / div.full under -prec-div=false
        rcp[i] = 1.0f / y[i];
        rs[i] = rsqrtf(y[i]);
        lg[i] = logf(y[i]);     // __logf under -use_fast_math
        sn[i] = sinf(y[i]);     // __sinf, __cosf under -use_fast_math
        cs[i] = cosf(y[i]);
    }
}
"""
N = 1 << 16
OUTPUTS = ("ex", "ex2", "q", "rcp", "rs", "lg", "sn", "cs")
SINCOS_MAX = 2.0 ** 18
"""Angles up to 2^18 rad (RoPE's pair 0 at position 262,144) judged for __sinf / __cosf."""
Measured = dict[str, np.ndarray]


def inputs() -> tuple[np.ndarray, np.ndarray]:
    """x: exponents d in [-87, 0] (e^d stays normal), the first 128 the integers 0, -1, ..., -87;
    y: divisors spread over [2^-100, 2^100] (inside the guide's [2^-126, 2^126]), the first 201
    the powers of two 2^-100 ... 2^100."""
    rng = np.random.default_rng(0)
    x = rng.uniform(-87.0, 0.0, N).astype(np.float32)
    x[:128] = -(np.arange(128) % 88)
    y = np.exp2(rng.uniform(-100.0, 100.0, N)).astype(np.float32)
    y[:201] = np.exp2(np.arange(-100, 101)).astype(np.float32)
    return x, y


def measure(cp: Any) -> Measured:
    """The kernel's outputs on ``inputs()``, on the device CuPy ``cp`` drives."""
    kernel = cp.RawModule(code=SOURCE, options=("--use_fast_math",)).get_function("fast_math_premises")
    x, y = inputs()
    out = {k: cp.empty(N, cp.float32) for k in OUTPUTS}
    kernel(((N + 255) // 256,), (256,), (cp.asarray(x), cp.asarray(y), *(out[k] for k in OUTPUTS), np.int32(N)))
    return {"x": x, "y": y, **{k: cp.asnumpy(v) for k, v in out.items()}}


def _ulps(got: np.ndarray, exact: np.ndarray) -> np.ndarray:
    """|got - exact| in float32 ulps of the exact value."""
    return np.abs(got.astype(np.float64) - exact) / ulp32(exact)


def check_exact_powers(m: Measured) -> None:
    """__expf(0) = 1, exp2f(k) = 2^k and 1.0f / 2^k = 2^-k exactly."""
    assert m["ex"][0] == 1.0, f"__expf(0) = {m['ex'][0]!r}"
    x, y = m["x"][:128].astype(np.float64), m["y"][:201].astype(np.float64)
    assert np.array_equal(m["ex2"][:128], np.exp2(x).astype(np.float32)), "exp2f inexact at an integer"
    assert np.array_equal(m["rcp"][:201], (1 / y).astype(np.float32)), "1.0f / 2^k inexact"


def check_fast_exp(m: Measured) -> None:
    """__expf(d) within ``FAST_EXPF``'s relative error at every d."""
    d = m["x"].astype(np.float64)
    rel_u = np.abs(m["ex"].astype(np.float64) / np.exp(d) - 1) / U32
    worst = int(np.argmax(rel_u / FAST_EXPF.u(d)))
    assert rel_u[worst] <= FAST_EXPF.u(d[worst]), (
        f"__expf({d[worst]!r}): {rel_u[worst]:.3f} u against the model's {FAST_EXPF.u(d[worst]):.3f} u")


def check_two_ulp(m: Measured) -> None:
    """x / y, 1.0f / y and rsqrtf(y) within 2 ulp of the exact values (normal results)."""
    x, y = m["x"].astype(np.float64), m["y"].astype(np.float64)
    for name, exact in (("q", x / y), ("rcp", 1 / y), ("rs", 1 / np.sqrt(y))):
        normal = np.abs(exact) >= np.finfo(np.float32).tiny
        err = _ulps(m[name][normal], exact[normal])
        assert err.max() <= 2.0, f"{name}: {err.max():.3f} ulp at y = {m['y'][normal][np.argmax(err)]!r}"


def check_fast_log(m: Measured) -> None:
    """__logf(y) within the default contract's log (``log_error_u``: 8 u of the result, 8 u
    absolute for y in [0.5, 2]; CUDA documents 3 ulp and 2^-21.41, 6 and 6.02 u)."""
    exact = np.log(m["y"].astype(np.float64))
    err_u = np.abs(m["lg"].astype(np.float64) - exact) / U32
    allowed = log_error_u(exact, c=DEFAULT)
    worst = int(np.argmax(err_u / allowed))
    assert err_u[worst] <= allowed[worst], (
        f"__logf({m['y'][worst]!r}): off by {err_u[worst]:.3f} u, the contract allows {allowed[worst]:.3f} u")


def check_fast_sincos(m: Measured) -> None:
    """__sinf / __cosf(θ) within 2^-21.41 + 2u·|θ| of sin / cos of the float32 θ, |θ| <= 2^18."""
    theta = m["y"].astype(np.float64)
    judged = theta <= SINCOS_MAX
    allowed = FAST_SINCOS_ABS + 2 * U32 * theta[judged]
    for name, exact in (("sn", np.sin(theta[judged])), ("cs", np.cos(theta[judged]))):
        err = np.abs(m[name][judged].astype(np.float64) - exact)
        worst = int(np.argmax(err / allowed))
        assert err[worst] <= allowed[worst], (
            f"{name}({theta[judged][worst]!r}): off by {err[worst]:.3e}, the RoPE model assumes {allowed[worst]:.3e}")


CHECKS: tuple[Callable[[Measured], None], ...] = (check_exact_powers, check_fast_exp, check_two_ulp, check_fast_log,
                                                  check_fast_sincos)
