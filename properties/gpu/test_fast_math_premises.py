"""The default contract's fast-math premises (``properties.gpu.fast_math_premises``), measured on
the device they describe. They run only where a CUDA device is usable (``logitcheck
device-check`` runs them); without one they are skipped and wait for the next device run. That
the checks accept the intrinsics at their documented worst and reject one step past it is
tested without a device in ``properties/zoo/test_fast_math_model.py``."""
from __future__ import annotations

from typing import Callable

import pytest

from properties.backends import cupy_device_reason, cupy_or_none
from properties.gpu.fast_math_premises import CHECKS, Measured, measure


@pytest.fixture(scope="module")
def measured() -> Measured:
    if cupy_device_reason() is not None:
        pytest.skip(f"no CUDA device: {cupy_device_reason()}")
    return measure(cupy_or_none())


@pytest.mark.parametrize("check", CHECKS, ids=lambda c: c.__name__)
def test_device_meets_the_premise(measured: Measured, check: Callable[[Measured], None]) -> None:
    check(measured)
