"""gpu_impl's whole-model pass on a CUDA device (CuPy) against the float64 oracle, within the same
float32/float16 error models as on NumPy. Skipped, with the reason, where no device is usable."""
from __future__ import annotations

import pytest

import gpu_impl.models as gm
from properties.backends import cupy_device_reason, cupy_or_none
from properties.models import runs
from properties.models.checks import judge

CASES = [("llama", "Q4_K", "float32"), ("qwen3", "Q8_0", "float32"), ("gemma2", "F32", "float32"),
         ("gemma2", "F16", "float16"), ("gemma3", "Q8_0", "float32"), ("gemma4", "BF16", "float16"),
         ("gemma3n", "F32", "float32")]


@pytest.mark.parametrize("arch, wtype, dtype", CASES, ids=str)
@pytest.mark.parametrize("chunk", [None, 5])
def test_gpu_impl_forward_on_device_within_error_model(arch, wtype, dtype, chunk):
    reason = cupy_device_reason()
    if reason:
        pytest.skip(reason)
    out = gm.run(runs.path(arch, wtype), runs.TOKENS, dtype=dtype, chunk=chunk, xp=cupy_or_none())
    judge(f"{arch}-{wtype} {dtype} on CUDA, chunk {chunk}", runs.env(arch, wtype, f"gpu_impl-{dtype}"),
          out["logits"], out["tensors"])
