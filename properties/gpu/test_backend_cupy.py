"""The CuPy backend: what can be checked without a device always runs (the gpu extra is
installed in CI), what needs a device skips with the reason printed.

The whole suite runs on CuPy with ``pytest --backend cupy``; this module is the always-on
smoke: CuPy imports, the RawKernel sources are importable, and on a device a sample of every
sampler agrees with the NumPy backend of the same implementation.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import gpu_impl
from gpu_impl.kernels import CUDA_SOURCES
from properties.backends import cupy_device_reason, load_impl
from properties.samplers.records import sampler_records
from properties.samplers.checks import check_matches_oracle
from properties.samplers.strategies import record_cases

cupy = pytest.importorskip("cupy", reason="the gpu extra (cupy-cuda13x / cupy-cuda12x) is not installed")


def test_cupy_and_kernel_sources_import():
    import cupyx  # noqa: F401  (gpu_impl scatters through cupyx on device)

    assert cupy.__version__
    assert CUDA_SOURCES and all("__global__" in src for src in CUDA_SOURCES.values())


def test_numpy_inputs_never_touch_cupy():
    """The NumPy path must not need a device even though CuPy is installed."""
    out = gpu_impl.softmax(np.zeros((2, 5), np.float32))
    assert type(out) is np.ndarray


@pytest.mark.parametrize("record", sampler_records(impl_only=True), ids=str)
@settings(max_examples=10)
@given(data=st.data())
def test_cupy_backend_matches_oracle(record, data):
    reason = cupy_device_reason()
    if reason:
        pytest.skip(f"needs a CUDA device: {reason}")
    case = data.draw(record_cases(record, "float32"), label="case")
    check_matches_oracle(load_impl("gpu_impl", "cupy"), record, case)
