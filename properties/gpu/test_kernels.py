"""gpu_impl's CuPy kernels on a CUDA device: the cases of kernel_agreement.py (agreement with the
NumPy path and the oracle, graph replay) and kernel_paths.py (the device path's host-side
branches and shared state). Skipped, with the reason, where no CUDA device is usable; the same
cases run on the CPU against the emulated kernels in test_kernels_emulated.py."""
from __future__ import annotations

import pytest

from properties.gpu import kernel_agreement, kernel_paths
from properties.gpu.device_cases import case_params, cp, needs_device, run_case

pytestmark = needs_device


@pytest.mark.parametrize("check, kw", case_params(kernel_agreement, kernel_paths))
def test_kernel_case(check, kw, monkeypatch):
    run_case(check, cp, kw, monkeypatch)
