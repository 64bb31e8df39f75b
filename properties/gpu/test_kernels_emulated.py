"""The kernel cases (kernel_agreement.py, kernel_paths.py), the device tests of gpu_impl's kernels,
run on the CPU: the kernels emulated from their own CUDA source (properties/gpu/emulator), CuPy
stood in by NumPy, a CUDA graph by the stand-in graph that refuses device reads and uploads while
it captures or replays. What only a device shows stays with the device run: timing, the device's
rounding (fused multiply-add, expf), CuPy's own kernels, a stream capture driven by the case
itself (those cases skip here). Same cases as on a device; under ci not the largest shapes."""
from __future__ import annotations

import pytest

from properties.gpu import kernel_agreement, kernel_paths
from properties.gpu.device_cases import case_params, run_case
from properties.gpu.emulator.cupy_standin import GraphsNotEmulated, emulated_device
from properties.gpu.emulator.launch import unavailable_reason
from properties.profiles import current_profile

REASON = unavailable_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"the kernel emulator: {REASON}")
# ci keeps (2, 262144) (the float4 path at the largest vocabulary) and leaves 64 x 262,144 (the
# benchmark's batch: 13 s a case here) to the nightly
MAX_ELEMENTS = 1 << 25 if current_profile() == "nightly" else 600_000


@pytest.mark.parametrize("check, kw", case_params(kernel_agreement, kernel_paths, max_elements=MAX_ELEMENTS))
def test_kernel_case_on_emulated_kernels(check, kw, monkeypatch):
    try:
        run_case(check, emulated_device(monkeypatch), kw, monkeypatch)
    except GraphsNotEmulated as e:
        pytest.skip(str(e))
