"""The verdict's logic on hand-made layer comparisons: "within" names the tensor that came closest
to its bound, "structural" the first in graph order past it (NaN counts as past), with its ratio;
the per-layer amplification reports the norm weights and the envelope's gain through each norm."""
from __future__ import annotations

import math

import numpy as np
import pytest

from oracle.models.layers import compare
from properties.models.verdict import amplification, judge

REF = {"inp_scaled": np.ones((2, 4)), "attn_norm-0": np.ones((2, 4)), "l_out-0": np.ones((2, 4)),
       "attn_norm-1": np.ones((2, 4)), "result_norm": np.ones((2, 4))}
BOUNDS = {k: 1e-3 for k in REF}


def _rows(errors: dict[str, float]):
    test = {k: v + errors.get(k, 0.0) for k, v in REF.items()}
    return compare(REF, test, BOUNDS)[0]


def test_within_names_the_closest_tensor():
    v = judge(_rows({"attn_norm-0": 2e-4, "l_out-0": 5e-4}), "gpu_impl-float32")
    assert not v.structural and v.closest == "l_out-0" and v.ratio == pytest.approx(0.5)
    assert v.line() == ("within the gpu_impl-float32 error model of this engine at every tensor "
                        "(closest: l_out-0 at ×0.5 its bound)")


def test_structural_names_the_first_tensor_in_graph_order():
    v = judge(_rows({"attn_norm-1": 0.5, "attn_norm-0": 3e-3}), "llama.cpp-cpu")
    assert v.structural and v.first == "attn_norm-0" and v.ratio == pytest.approx(3.0)
    assert v.line() == "structural: first tensor past its bound: attn_norm-0, ×3 its bound"


def test_nan_is_structural():
    v = judge(_rows({"l_out-0": math.nan}), "gpu_impl-float16")
    assert v.first == "l_out-0" and v.ratio == math.inf


def test_no_rows_is_an_error():
    with pytest.raises(ValueError):
        judge([], "gpu_impl-float32")


def test_amplification_reports_weights_and_gain():
    w = np.array([300.0, 10.0, 10.0, 10.0])
    norms = {"blk.0.attn_norm.weight": w, "blk.1.attn_norm.weight": 2 * np.ones(4), "output_norm.weight": np.ones(4)}
    env = {"inp_scaled": 1e-7, "attn_norm-0": 4e-6, "l_out-0": 2e-6, "attn_norm-1": 3e-6, "l_out-1": 1e-6,
           "result_norm": 1e-6}
    la = amplification(norms, env)
    assert [a.layer for a in la] == [0, 1, -1]
    assert la[0].max_abs == 300 and la[0].rms == pytest.approx(math.sqrt((300**2 + 300) / 4))
    assert la[0].gain == pytest.approx(40) and la[1].gain == pytest.approx(1.5) and la[2].gain == pytest.approx(1)
    v = judge(_rows({}), "gpu_impl-float32", norms, env)
    assert v.lines()[1].startswith("layer 0: norm weights max|w| 300, rms(w) 150; error gain through the norm "
                                   "(error model): attn_norm ×40")
    assert amplification(norms)[0].gain is None  # no envelope: weights only
