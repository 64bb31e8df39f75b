"""``--backend cupy`` where no CUDA device is usable is refused with the reason and a non-zero
exit status, never a green run of skips (runs in CI, which has no GPU)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from properties.gpu.device_cases import REASON

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.skipif(REASON is None, reason="a CUDA device is usable here, so --backend cupy runs")
def test_backend_cupy_without_a_device_fails_loudly():
    proc = subprocess.run([sys.executable, "-m", "pytest", "--backend", "cupy", "-q", "-p", "no:cacheprovider",
                           "properties/gpu/device_cases.py"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0, f"--backend cupy exited 0 without a device:\n{proc.stdout}\n{proc.stderr}"
    assert "--backend cupy needs a usable CUDA device" in proc.stderr + proc.stdout
