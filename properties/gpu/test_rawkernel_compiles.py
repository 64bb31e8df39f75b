"""Every CUDA source in gpu_impl.kernels compiles to PTX with nvcc (no GPU needed), and every
entry point gpu_impl launches is in it."""
import shutil
import subprocess

import pytest

from gpu_impl.kernels import CUDA_SOURCES, ENTRY_POINTS

NVCC = shutil.which("nvcc")


@pytest.mark.parametrize("unit", sorted(CUDA_SOURCES))
def test_cuda_source_compiles_to_ptx(unit, tmp_path):
    if NVCC is None:
        print(f"skipping {unit}: nvcc is not on PATH")
        pytest.skip("nvcc is not on PATH, so the CUDA sources cannot be compiled here")
    src = tmp_path / f"{unit}.cu"
    ptx = tmp_path / f"{unit}.ptx"
    src.write_text(CUDA_SOURCES[unit])
    # sm_90: the H100/H200 the kernels are tuned for; -Werror on cross-execution-space and
    # other warnings so that a warning NVRTC might treat differently fails here first
    proc = subprocess.run([NVCC, "-ptx", "-arch=sm_90", "-Werror", "all-warnings", str(src), "-o", str(ptx)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"nvcc failed for {unit}:\n{proc.stderr}"
    text = ptx.read_text()
    missing = [e for e in ENTRY_POINTS if f".entry {e}(" not in text]
    assert not missing, f"{unit}: entry points missing from the PTX: {missing}"
