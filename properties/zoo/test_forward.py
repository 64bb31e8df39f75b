"""Every ops-zoo mutant run through gpu_impl's whole-model pass (gemma2 fixture, fed 8 tokens per
step through the KV cache): the layer comparison must name the tensor where it enters, and
every mutant must be classified here (a new mutant fails until it is).

"does not enter": the pass is bit-identical to the unmutated one on this model and input (the
function is not called, or the bug needs inputs the model never produces); "within bounds": it
changes values, by less than a correct float32/float16 engine may. Both are stated with the
reason; the op-level zoo (properties/zoo/test_zoo.py) kills every one of them.
"""
from __future__ import annotations

import numpy as np
import pytest

from properties.models import runs
from properties import recording
from properties.zoo.forward import CHUNK, FIXTURE, OP_MUTANTS, dtype_of, locate, run_mutant
from reports.cli import main as cli

ATTN = "kqv_out-0"
EXPECTED = {  # mutant: (verdict, first tensor or the reason it cannot show here)
    "rope_restarts_each_step": ("diverges", ATTN), "no_causal_mask": ("diverges", ATTN),
    "kv_projected_to_d_model": ("raises", "qkv-0"), "whole_sequence_refed": ("diverges", ATTN),
    "gelu_exact_for_tanh": ("diverges", "ffn_geglu-0"), "softcap_15_not_30": ("diverges", "result_output"),
    "rms_norm_mean_not_mean_square": ("diverges", "attn_norm-0"), "embedding_scale_missing": ("diverges", "inp_scaled"),
    "rope_layouts_swapped": ("diverges", ATTN), "logits_sliced_by_hidden": ("diverges", "result_output"),
    "gqa_heads_interleaved": ("diverges", ATTN), "window_off_by_one": ("diverges", ATTN),
    "rms_norm_drops_eps": ("within bounds", "eps = 1e-6 against mean squares near 1: a 5e-7 relative change, "
                                            "inside float32 rounding"),
    "masked_nan_leaks": ("within bounds", "the additive mask is exact on finite inputs; the cache never holds NaN"),
    "rms_norm_ignores_unit_offset": ("within bounds", "GGUF norm weights already hold 1 + w: the pass never asks "
                                                      "for unit_offset; the replacement is a correct plain RMSNorm"),
    "matmul_fp16_accumulator": ("within bounds", "at K <= 256 fp16 accumulation stays within 4x the fp16 engine's "
                                                 "envelope"),
    "softmax_without_max": ("does not enter", "attention computes its own softmax; the pass never calls softmax"),
    "softmax_mask_as_large_negative": ("does not enter", "the pass never calls softmax"),
    "cache_positions_ignored": ("does not enter", "the engine stores cache cells in position order"),
    "layer_norm_one_pass_variance": ("does not enter", "no LayerNorm in llama/qwen3/gemma2"),
    "argmax_last_max": ("does not enter", "the pass returns logits; nothing takes an argmax"),
    "embedding_scale_rounded_bf16": ("does not enter", "sqrt(64) = 8 is exact in bf16"),
    "rope_positions_through_fp16": ("does not enter", "positions below 2048 are exact in fp16"),
}
TABLE: dict[str, dict[str, str]] = {}


def test_unmutated_pass_is_within_bounds():
    e = locate(None)
    assert e.verdict == "does not enter", e


@pytest.mark.parametrize("mutant", OP_MUTANTS, ids=lambda m: m.name)
def test_mutant_is_located_in_the_forward_pass(mutant):
    assert mutant.name in EXPECTED, f"{mutant.name}: classify this mutant in EXPECTED ({locate(mutant, dtype_of(mutant))})"
    want, where = EXPECTED[mutant.name]
    e = locate(mutant, dtype_of(mutant))
    arch, wtype = FIXTURE[dtype_of(mutant)]
    TABLE[mutant.name] = {"bug": mutant.description, "fixture": f"{arch}-{wtype} {dtype_of(mutant)}", "verdict": e.verdict,
                          "first tensor": e.tensor, "layer": e.layer, "op": e.op,
                          "detail": e.detail if e.verdict in ("diverges", "raises") else where}
    recording.table("model_mutants", TABLE)
    assert e.verdict == want, f"{mutant.name}: expected {want}, got {e.verdict} ({e.tensor} {e.detail})"
    if want in ("diverges", "raises"):
        assert e.tensor == where, f"{mutant.name}: first divergence at {e.tensor}, expected {where} ({e.detail})"


@pytest.mark.parametrize("name, tensor", [("rope_restarts_each_step", ATTN), ("gelu_exact_for_tanh", "ffn_geglu-0")])
def test_layers_command_names_the_mutant(tmp_path, capsys, name, tensor):
    """The same answer from the command line: forward the oracle, save the mutated gpu_impl run,
    ``logitcheck layers --error-model gpu_impl-float32`` names the tensor (exit status 1)."""
    arch, wtype = FIXTURE["float32"]
    model, toks = runs.path(arch, wtype), ",".join(map(str, runs.TOKENS))
    assert cli(["forward", str(model), "--tokens", toks, "--out", str(tmp_path / "ref.npz")]) == 0
    mutant = next(m for m in OP_MUTANTS if m.name == name)
    dec = run_mutant(mutant)
    np.savez(tmp_path / "test.npz", tokens=np.asarray(runs.TOKENS), **dec.tensors())
    capsys.readouterr()
    rc = cli(["layers", str(tmp_path / "ref.npz"), str(tmp_path / "test.npz"), "--model", str(model),
              "--error-model", "gpu_impl-float32"])
    out = capsys.readouterr().out
    assert rc == 1 and f"first divergence at layer 0, {tensor}" in out, out
    assert CHUNK < len(runs.TOKENS)  # the run had decode steps after its prefill
