"""The NumPy and CuPy backends of gpu_impl on fp32, fp16 and bf16 input (bf16 as
ml_dtypes.bfloat16 on both): both inside the oracle's bracket, and bit-identical where the
result involves no rounding choice (order statistics, one IEEE operation per element)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from properties.backends import load_impl
from properties.samplers.records import sampler_records
from properties.samplers.checks import check_matches_oracle, run_impl
from properties.gpu.device_cases import needs_device
from properties.samplers.strategies import record_cases

pytestmark = needs_device
EXACT = {"top_k", "temp", "greedy", "logit_bias", "penalties"}


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("record", sampler_records(impl_only=True), ids=str)
@settings(max_examples=8)
@given(data=st.data())
def test_numpy_and_cupy_backends_agree(record, dtype, data):
    if dtype not in record.dtypes:
        pytest.skip(f"{record.name} is not drawn in {dtype}")
    case = data.draw(record_cases(record, dtype), label="case")
    on_gpu, on_cpu = load_impl("gpu_impl", "cupy"), load_impl("gpu_impl", "numpy")
    check_matches_oracle(on_gpu, record, case)
    if record.name in EXACT:
        a, b = run_impl(on_gpu, record, case), run_impl(on_cpu, record, case)
        for x, y in zip(a if isinstance(a, tuple) else (a,), b if isinstance(b, tuple) else (b,)):
            np.testing.assert_array_equal(np.asarray(x), np.asarray(y))
