"""CuPy flushes float32 subnormals: every kernel it generates (ufuncs, reductions, scans,
``astype``) is compiled with ``-ftz=true``, so a float32 subnormal operand or result is zero
there, comparisons included, while gpu_impl's own kernels are compiled without it. A threshold
parameter of 7e-45 is a legal value (top_p > 0 keeps the first token only), and the array code
that decides on it must decide as on NumPy: in float64, converted on the host.

Run on the emulator's CuPy stand-in (which models the flush) and, where a CUDA device is usable,
on CuPy itself, so that the model is checked against the device it stands for."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest

from properties.backends import cupy_device_reason, cupy_or_none
from properties.gpu.emulator.launch import unavailable_reason

TINY = np.float32(7e-45)  # five times the smallest subnormal
ROWS = np.array([[1.0, 0.5, 0.2, 0.1, -150.0],  # the last two probabilities underflow to 0 in float32:
                 [0.3, 0.3, -2.0, 0.0, -200.0],  # below any positive threshold, dropped by one
                 [0.0, 0.0, -1.0, -1.0, -120.0]], np.float32)  # zero logits tied at the max
HISTORY = np.array([[0, 2]] * ROWS.shape[0])
NO_HISTORY = np.full((ROWS.shape[0], 1), -1)
U = np.where(np.arange(ROWS.shape[1]) == 1, 0.9, 0.1) * np.ones((ROWS.shape[0], 1))
"""candle's uniforms: token 1's Gumbel is the largest, so a T > 0 race breaks row 2's tie towards it."""


@pytest.fixture(params=["emulated", "cupy"])
def cp(request, monkeypatch) -> Any:
    if request.param == "cupy":
        if cupy_device_reason() is not None:
            pytest.skip(f"no CUDA device: {cupy_device_reason()}")
        return cupy_or_none()
    if unavailable_reason() is not None:
        pytest.skip(f"the kernel emulator: {unavailable_reason()}")
    from properties.gpu.emulator.cupy_standin import emulated_device
    return emulated_device(monkeypatch)


def test_cupy_flushes_float32_subnormals(cp):
    """What the stand-in models, as CuPy does it: operands and results of its kernels."""
    a = cp.asarray(np.array([TINY, -TINY, 0.5], np.float32))
    assert cp.asnumpy(a > 0).tolist() == [False, False, True]
    assert cp.asnumpy(a.astype(np.float64)).tolist() == [0.0, 0.0, 0.5]
    assert cp.asnumpy(a * np.float32(1)).tolist() == [0.0, 0.0, 0.5]
    assert cp.asnumpy(cp.cumsum(a)).tolist() == [0.0, 0.0, 0.5]
    assert int(cp.argmax(cp.asarray(np.array([0.0, TINY], np.float32)))) == 0  # a tie with 0: the first
    assert cp.asnumpy(a).tolist() == np.array([TINY, -TINY, 0.5], np.float32).tolist()  # a copy keeps them


def _engines() -> Any:
    import gpu_impl.engines as engines
    return engines


def _samplers() -> Any:
    import gpu_impl
    return gpu_impl


WEIGHTS, MASKED, VALUES = (lambda w: w > 0), np.isfinite, (lambda a: a)
"""What is compared: the tokens a weight row keeps, the tokens a logit row keeps, or every value
(ids, or logits where 0 / 7e-45 must stay 0, not NaN)."""

CALLS: list[tuple[str, Callable[[Any, Any], Any], Callable[[np.ndarray], np.ndarray]]] = [
    ("mistral.rs top_p = 7e-45 keeps one token", lambda e, x: e.mistralrs_weights(
        x, NO_HISTORY, 1.0, 0.0, 0.0, 1.0, 0, TINY, 0.0), WEIGHTS),
    ("mistral.rs min_p = 7e-45", lambda e, x: e.mistralrs_weights(x, NO_HISTORY, 1.0, 0.0, 0.0, 1.0, 0, 1.0, TINY),
     WEIGHTS),
    ("transformers epsilon = 7e-45 is a valid eps", lambda e, x: e.hf_epsilon(x, TINY), MASKED),
    ("transformers eta = 7e-45 is a valid eps", lambda e, x: e.hf_eta(x, TINY), MASKED),
    ("transformers typical mass = 7e-45 is a valid mass", lambda e, x: e.hf_typical(x, TINY), MASKED),
    ("transformers min_p = 7e-45 drops the tokens of probability 0", lambda e, x: e.hf_min_p(x, TINY), MASKED),
    ("transformers min_p = -7e-45 is refused", lambda e, x: e.hf_min_p(x, -TINY), MASKED),
    ("transformers chain with min_p = 7e-45", lambda e, x: e.hf_chain(x, NO_HISTORY, 1.0, 1.0, 0, 1.0, TINY), MASKED),
    ("vLLM min_p = 7e-45 drops the tokens of probability 0", lambda e, x: e.vllm_min_p(x, TINY), MASKED),
    ("vLLM chain with min_p = 7e-45", lambda e, x: e.vllm_chain(x, NO_HISTORY, NO_HISTORY, 1.0, 0.0, 0.0, 1.0, TINY,
                                                                0, 1.0), MASKED),
    ("transformers temperature = 7e-45 is a valid temperature", lambda e, x: e.hf_temperature(x, TINY), VALUES),
    ("transformers repetition penalty = 7e-45 is a valid penalty",
     lambda e, x: e.hf_repetition_penalty(x, HISTORY, TINY), MASKED),
    ("candle T = 7e-45 races: its noise breaks the tie at the max", lambda e, x: e.candle_sample(x, TINY, U), VALUES),
    ("llama.cpp temp t = 7e-45 divides: 0 stays 0", lambda e, x: _samplers().temp(x, TINY), VALUES),
    ("llama.cpp temp_ext t = 7e-45, delta 0: temp", lambda e, x: _samplers().temp_ext(x, TINY, 0.0, 1.0), VALUES),
]


def _outcome(call: Callable[[Any, Any], Any], x: Any, seen: Callable[[np.ndarray], np.ndarray], cp: Any) -> Any:
    """What ``seen`` shows of the output, or the refusal's message."""
    try:
        out = call(_engines(), x)
    except ValueError as e:
        return f"refused: {e}"
    return seen(np.asarray(out if isinstance(out, np.ndarray) else cp.asnumpy(out))).tolist()


@pytest.mark.parametrize("why, call, seen", CALLS, ids=[c[0] for c in CALLS])
def test_subnormal_thresholds_decide_as_on_numpy(cp, why, call, seen):
    """The tokens kept on the device are NumPy's (the values may differ in their last bits: the
    device's softmax is a kernel), and a parameter refused on one backend is refused on both.
    Before the thresholds were decided in float64, the device path switched mistral.rs' top_p
    off (four tokens kept instead of one) and refused transformers' eps and mass as outside
    (0, 1); before the divisions and the min_p products were made exact there, it gave NaN for
    a zero logit at t = 7e-45, refused that temperature (and that repetition penalty) in
    transformers, accepted a min_p of -7e-45, kept the tokens of probability 0 at min_p, epsilon
    and eta = 7e-45, and took candle's T = 7e-45 for greedy."""
    want = _outcome(call, ROWS, seen, cp)
    got = _outcome(call, cp.asarray(ROWS), seen, cp)
    assert got == want, f"{why}: the device gives {got}, NumPy {want}"


def test_the_stand_in_hands_matmul_on_unflushed(monkeypatch):
    """``matmul`` is cuBLAS's on CuPy, not a kernel CuPy generates: the stand-in computes it on the
    values as given (it once recursed into itself there, and every op that multiplies matrices
    crashed under ``--backend emulated``)."""
    if unavailable_reason() is not None:
        pytest.skip(f"the kernel emulator: {unavailable_reason()}")
    from properties.gpu.emulator.cupy_standin import DeviceArray, emulated_device
    cp = emulated_device(monkeypatch)
    a = cp.asarray(np.array([[2.0, 1.0]], np.float32))
    b = cp.asarray(np.array([[TINY], [3.0]], np.float32))
    out = a @ b
    assert isinstance(out, DeviceArray) and cp.asnumpy(out).tolist() == (np.array([[2.0, 1.0]], np.float32)
                                                                          @ np.array([[TINY], [3.0]], np.float32)).tolist()
