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
ROWS = np.array([[1.0, 0.5, 0.2, 0.1], [0.3, 0.3, -2.0, 0.0]], np.float32)


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


CALLS: list[tuple[str, Callable[[Any, Any], Any]]] = [
    ("mistral.rs top_p = 7e-45 keeps one token", lambda e, x: e.mistralrs_weights(
        x, np.full((2, 1), -1), 1.0, 0.0, 0.0, 1.0, 0, TINY, 0.0)),
    ("mistral.rs min_p = 7e-45", lambda e, x: e.mistralrs_weights(x, np.full((2, 1), -1), 1.0, 0.0, 0.0, 1.0, 0, 1.0, TINY)),
    ("transformers epsilon = 7e-45 is a valid eps", lambda e, x: e.hf_epsilon(x, TINY)),
    ("transformers eta = 7e-45 is a valid eps", lambda e, x: e.hf_eta(x, TINY)),
    ("transformers typical mass = 7e-45 is a valid mass", lambda e, x: e.hf_typical(x, TINY)),
]


@pytest.mark.parametrize("why, call", CALLS, ids=[c[0] for c in CALLS])
def test_subnormal_thresholds_decide_as_on_numpy(cp, why, call):
    """The tokens kept on the device are NumPy's (the values may differ in their last bits: the
    device's softmax is a kernel). Before the thresholds were decided in float64, the device path
    switched mistral.rs' top_p off (four tokens kept instead of one) and refused transformers' eps
    and mass as outside (0, 1)."""
    kept = (lambda w: w > 0) if why.startswith("mistral.rs") else np.isfinite  # weights, or masked logits
    want = kept(np.asarray(call(_engines(), ROWS)))
    got = kept(cp.asnumpy(call(_engines(), cp.asarray(ROWS))))
    np.testing.assert_array_equal(got, want, err_msg=f"{why}: the tokens kept differ")


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
