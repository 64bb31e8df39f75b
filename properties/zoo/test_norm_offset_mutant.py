"""The norm-offset port mutant (``forward.norm_offset_mutant``): every RMSNorm weight + eps, the
unit offset of Gemma's stored 1 + w added once more in part. At eps = 0.05 (0.125 % of the drift
model's block-norm rms of 40) the float32 verdict flags it where it enters, the first norm; at
eps = 0 the pass is the unmutated one, bit for bit (the mutant changes nothing else)."""
from __future__ import annotations

import numpy as np

from properties.models import verdict as V
from properties.zoo.forward import norm_offset_mutant, run_pass

ENGINE = "gpu_impl-float32"


def test_large_norm_offset_is_flagged_at_the_first_norm():
    got = run_pass(norm_offset_mutant(0.05), V.drift_path())
    v = V.judge_run(V.drift_envelope(ENGINE), ENGINE, V.drift_model(), got)
    assert v.structural and v.first == "attn_norm-0", v.line()


def test_zero_offset_is_the_unmutated_pass():
    control = run_pass(None, V.drift_path())
    got = run_pass(norm_offset_mutant(0.0), V.drift_path())
    assert got.keys() == control.keys()
    assert all(np.array_equal(got[k], control[k]) for k in control)
