"""The local replay (properties/models/replay.py): its pieces, and both ways on gpu_impl's engines.

Right both ways on the models' real engines is pinned elsewhere: gpu_impl's correct float32,
float16 and bfloat16 passes of both drift models are within it (test_drift.py, through the
verdict), each port mutant is past it at its entry tensor in every precision, exact GELU in bfloat16
included (zoo/test_forward.py),
and real llama.cpp's per-tensor dumps are within it (test_decode_prefill.py).
"""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest

from gpu_impl.models import run
from oracle.models import forward
from properties.models import runs
from properties.models import verdict as V
from properties.models.replay import half_step, one_op, replay, representable

DTYPES = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}


@pytest.mark.parametrize("storage", sorted(DTYPES))
def test_half_step_is_half_the_spacing(storage):
    """Half the gap to the next representable value, across binades and in float16's subnormals."""
    rng = np.random.default_rng(0)
    v = np.concatenate([np.ldexp(rng.uniform(1, 2, 200), rng.integers(-20, 15, 200)), [1.0, 2.0, 3e-6, 6.1e-5]])
    d = DTYPES[storage]
    x = v.astype(d)
    gap = (np.nextafter(x, np.inf) - x).astype(np.float64) if storage != "bfloat16" else \
        np.array([float(ml_dtypes.finfo(d).eps) * 2.0 ** math.floor(math.log2(abs(float(e))))
                  if abs(float(e)) >= float(ml_dtypes.finfo(d).tiny) else float(ml_dtypes.finfo(d).smallest_subnormal)
                  for e in x])
    np.testing.assert_array_equal(half_step(x.astype(np.float64), storage), gap / 2)


def test_representable_reads_the_storage_off_the_values():
    x = np.array([1.0, 1.5, np.inf, np.nan, -0.25])
    assert representable(x, "float16") and representable(x, "bfloat16")
    assert not representable(x + 2.0**-12, "float16") and representable(x + 2.0**-12, "float32")


def test_one_op_needs_every_op_between_dumped():
    """ffn_geglu is one op from ffn_gate and ffn_up; with an undumped step between (a sparse gate) it
    is not; Kcur_normed (its input, the key product, is never dumped) is not in ONE_OP."""
    order = ["ffn_norm-0", "ffn_gate-0", "ffn_up-0", "ffn_geglu-0", "", "Kcur_normed-0"]
    dumped = dict.fromkeys(["ffn_norm-0", "ffn_gate-0", "ffn_up-0", "ffn_geglu-0", "Kcur_normed-0"])
    assert one_op("ffn_geglu-0", order, dumped) and one_op("ffn_up-0", order, dumped)
    assert not one_op("Kcur_normed-0", order, dumped)
    sparse = ["ffn_gate-0", "ffn_up-0", "ffn_gate_sparse-0", "ffn_geglu-0"]
    assert not one_op("ffn_geglu-0", sparse, dumped)
    assert not one_op("ffn_geglu-0", order, {k: v for k, v in dumped.items() if k != "ffn_up-0"})


def test_the_oracle_replays_itself_exactly():
    """The oracle's own float64 pass replayed: every residual 0 (every row at ×0)."""
    m = runs.model("gemma4", "F32")
    f = forward(m, runs.TOKENS)
    r = replay(m, runs.TOKENS, f.tensors, "gpu_impl-float32")
    assert len(r.rows) == len(f.tensors) and all(row.value == 0 for row in r.rows), r.worst().line()


@pytest.fixture(scope="module")
def bf16_run() -> dict[str, np.ndarray]:
    out = run(V.drift_path("gemma4"), runs.TOKENS, dtype="bfloat16", chunk=8)
    return {**out["tensors"], "result_output": out["logits"]}


def test_correct_bfloat16_engine_within_and_one_ulp_off_is_past(bf16_run):
    """gpu_impl's bfloat16 pass of the gemma4 drift model: within; the same dump with one value of
    ffn_geglu-3 moved by one bfloat16 step (a value no compute error reaches) is past the one-op
    bound there, and only there."""
    model, engine = V.drift_model("gemma4"), "gpu_impl-bfloat16"
    assert replay(model, runs.TOKENS, bf16_run, engine).first() is None
    bad = dict(bf16_run)
    g = bad["ffn_geglu-3"].astype(np.float64).copy()
    i = np.unravel_index(np.argmax(np.abs(g)), g.shape)
    g[i] = float(np.nextafter(ml_dtypes.bfloat16(g[i]), ml_dtypes.bfloat16(np.inf)))
    bad["ffn_geglu-3"] = g
    first = replay(model, runs.TOKENS, bad, engine).first()
    assert first is not None and first.name == "ffn_geglu-3" and first.past == 1, first


@pytest.mark.parametrize("poison", [np.nan, np.inf])
def test_a_nan_or_inf_in_the_dump_never_passes(bf16_run, poison):
    bad = dict(bf16_run)
    x = bad["attn_out-2"].copy()
    x[3, 5] = poison
    bad["attn_out-2"] = x
    first = replay(V.drift_model("gemma4"), runs.TOKENS, bad, "gpu_impl-bfloat16").first()
    assert first is not None and first.name == "attn_out-2", first


def test_odd_dump_entries_are_skipped_not_fatal():
    """A tensor of another size is neither fed on nor replayed (the float64 comparison reports its
    shape); a non-numeric entry (a dump's metadata) is skipped."""
    m = runs.model("gemma2", "F32")
    f = forward(m, runs.TOKENS)
    dump = {**f.tensors, "version": np.array("llama.cpp b1"), "attn_out-0": f.tensors["attn_out-0"][:5]}
    r = replay(m, runs.TOKENS, dump, "gpu_impl-float32")
    assert r.first() is None and "attn_out-0" not in r.by_name()


def test_a_dump_with_nothing_to_replay_says_nothing_about_it():
    """Tokens that do not match the dump's length: no tensor is replayed, and the verdict does not
    claim "within the local replay"."""
    m = runs.model("gemma2", "F32")
    f = forward(m, runs.TOKENS)
    r = replay(m, runs.TOKENS[:5], f.tensors, "gpu_impl-float32")
    assert r.rows == () and r.first() is None
    env = runs.env("gemma2", "F32", "gpu_impl-float32")
    v = V.verdict_of(env, "gpu_impl-float32", m, f.tensors, None, r)
    assert not v.replayed and "local replay" not in v.line(), v.line()
