"""Every CUDA source in gpu_impl.kernels compiles to PTX with nvcc (no GPU needed)."""
import shutil
import subprocess

import pytest

from gpu_impl.kernels import CUDA_SOURCES

NVCC = shutil.which("nvcc")


@pytest.mark.parametrize("entry", sorted(CUDA_SOURCES))
def test_cuda_source_compiles_to_ptx(entry, tmp_path):
    if NVCC is None:
        print(f"skipping {entry}: nvcc is not on PATH")
        pytest.skip("nvcc is not on PATH, so the CUDA sources cannot be compiled here")
    src = tmp_path / f"{entry}.cu"
    ptx = tmp_path / f"{entry}.ptx"
    src.write_text(CUDA_SOURCES[entry])
    proc = subprocess.run([NVCC, "-ptx", "-arch=sm_80", str(src), "-o", str(ptx)],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"nvcc failed for {entry}:\n{proc.stderr}"
    assert f".entry {entry}" in ptx.read_text(), f"{entry} is missing from the PTX"
