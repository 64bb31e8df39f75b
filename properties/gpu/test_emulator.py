"""The kernel emulator (properties/gpu/emulator) both ways: gpu_impl's kernels pass under it
(test_kernels_emulated.py runs the device tests), and kernels written wrong fail under it: a
tie-break, a vector load and a last-block hand-off mutated in gpu_impl's own source, a barrier
some threads never reach, a shuffle in a warp with exited lanes, a scalar argument of the
wrong width; block order is drawn from the seed (a kernel that assumes an order is seen)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from gpu_impl.kernels import cuda_source
from properties.gpu.kernel_agreement import top_k_bit_identical_to_numpy
from properties.gpu.emulator.cupy_standin import emulated_device
from properties.gpu.emulator.launch import EmulatedKernel, unavailable_reason

REASON = unavailable_reason()
pytestmark = pytest.mark.skipif(REASON is not None, reason=f"the kernel emulator: {REASON}")
ROOT = Path(__file__).resolve().parents[2]

# (what is wrong, text in gpu_impl's kernels, its replacement, family, shape): each breaks top_k
MUTANTS = [
    ("the last tie of a prefix dropped", "return v > c || (v == c && id <= cut);", "return v > c || (v == c && id < cut);",
     "plateaus", (3, 1000)),
    ("the float4 load skips a row's last four columns", "if (col < hi) q = x4[col >> 2];", "if (col + 4 < hi) q = x4[col >> 2];",
     "peaked", (2, 4100)),
    ("the first block of a row to finish, not the last, decides it", "*flag = ticket == gridDim.x - 1;", "*flag = ticket == 0;",
     "flat", (2, 32000)),
]


@pytest.mark.parametrize("why, old, new, family, shape", MUTANTS, ids=[m[0] for m in MUTANTS])
def test_a_mutated_kernel_fails_the_device_tests(why, old, new, family, shape, monkeypatch):
    source = cuda_source()
    assert source.count(old) == 1, f"the mutation's text is not in the kernels once: {old}"
    cp = emulated_device(monkeypatch, source=source.replace(old, new))
    with pytest.raises((AssertionError, RuntimeError)):
        top_k_bit_identical_to_numpy(cp, family, shape)


def _kernel(body: str, params: str = "int* out", name: str = "k") -> str:
    return f'extern "C" __global__ void {name}({params}) {{ {body} }}'


def test_a_barrier_some_threads_never_reach_is_a_deadlock():
    src = _kernel("if (threadIdx.x < 16) __syncthreads(); else out[0] = __shfl_xor_sync(0xffffffffu, 1, 1);")
    with pytest.raises(RuntimeError, match="deadlock"):
        EmulatedKernel("k", source=src)((1,), (32,), (np.zeros(1, np.int32),))


def test_a_shuffle_in_a_warp_with_exited_lanes_is_reported():
    src = _kernel("if (threadIdx.x >= 16) return; out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, (int)threadIdx.x, 1);")
    with pytest.raises(RuntimeError, match="lanes have returned"):
        EmulatedKernel("k", source=src)((1,), (32,), (np.zeros(32, np.int32),))


def test_a_scalar_of_the_wrong_width_is_refused():
    src = _kernel("out[0] = (int)n;", "int* out, const long long n")
    k = EmulatedKernel("k", source=src)
    with pytest.raises(TypeError, match="8 bytes"):
        k((1,), (32,), (np.zeros(1, np.int32), np.int32(3)))
    out = np.zeros(1, np.int32)
    k((1,), (32,), (out, np.int64(3)))
    assert out[0] == 3


def test_shuffles_and_block_sums_compute_what_cuda_does():
    src = _kernel("""
        const int lane = threadIdx.x & 31;
        int s = lane;
        for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
        int up = __shfl_up_sync(0xffffffffu, lane, 3);
        unsigned b = __ballot_sync(0xffffffffu, lane % 3 == 0);
        out[3 * threadIdx.x] = s; out[3 * threadIdx.x + 1] = up; out[3 * threadIdx.x + 2] = (int)b;""")
    out = np.zeros(3 * 64, np.int32)
    EmulatedKernel("k", source=src)((1,), (64,), (out,))
    got = out.reshape(64, 3)
    lane = np.arange(64) % 32
    assert (got[:, 0] == sum(range(32))).all()
    np.testing.assert_array_equal(got[:, 1], np.where(lane >= 3, lane - 3, lane))
    assert (got[:, 2].view(np.uint32) == sum(1 << i for i in range(0, 32, 3))).all()


def test_block_order_is_drawn_from_the_seed():
    """A kernel that assumes block 0 runs first is seen: the order changes with the seed, and the
    same seed gives the same order."""
    src = _kernel("if (threadIdx.x == 0) out[blockIdx.x] = atomicAdd(&out[64], 1);")
    orders = []
    for seed in (0, 1, 0):
        out = np.zeros(65, np.int32)
        EmulatedKernel("k", seed=seed, source=src)((64,), (32,), (out,))
        assert sorted(out[:64]) == list(range(64))
        orders.append(out[:64].tolist())
    assert orders[0] == orders[2] != orders[1]


def test_backend_emulated_judges_gpu_impl_device_path():
    """``--backend emulated`` runs the suite's judged tests on gpu_impl's device path."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "--backend", "emulated", "-q", "-p", "no:cacheprovider",
                           "-p", "no:xdist", "--hypothesis-profile=ci", "--function", "top_k",
                           "properties/samplers/test_corners.py"], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "judged gpu_impl" in proc.stdout and " 0 failed" in proc.stdout, proc.stdout[-3000:]
