"""The float64 forward pass against llama.cpp's goldens (fixtures/goldens), fixture by fixture.

Bounds come from the llama.cpp-cpu error model (properties/models/error_model.py): max |Δlogit|
<= MARGIN × envelope; per position KL(oracle ‖ llama.cpp) <= the KL bound; the same top-1 at
every position whose oracle top-1 margin exceeds twice that position's bound (below it both
tokens are legal answers, and the position is counted as "may differ"); and the residual
stream after every block within MARGIN × its envelope. Quantized fixtures also report their
KL against their F32 twin, for the oracle and for llama.cpp.
"""
from __future__ import annotations

import numpy as np
import pytest

from fixtures import gguf_gen, goldens
from oracle.models import forward
from oracle.models.parity import compare
from properties.models import runs

FIXTURES = [f"{a}-{w}" for a, w in runs.MODELS]


def _split(fixture: str) -> tuple[str, str]:
    arch, wtype = fixture.split("-", 1)
    return arch, wtype


@pytest.mark.parametrize("fixture", FIXTURES)
def test_golden_was_computed_from_this_fixture(fixture):
    entry = goldens.manifest()["goldens"][fixture]
    got = goldens.sha256(runs.path(*_split(fixture)))
    assert got == entry["fixture_sha256"], (
        f"{fixture}: the fixture generator's output changed since the goldens were computed "
        f"(sha256 {got[:12]}… vs {entry['fixture_sha256'][:12]}…): regenerate with `{goldens.COMMAND}`")


@pytest.mark.peer
@pytest.mark.parametrize("fixture", FIXTURES)
def test_oracle_matches_llama_cpp_golden(fixture):
    arch, wtype = _split(fixture)
    e = runs.env(arch, wtype, "llama.cpp-cpu")
    gold = goldens.load(arch, wtype)
    oracle, ref = e.exact.logits, gold["logits"].astype(np.float64)
    diff = np.abs(ref - oracle)
    par = compare(oracle, ref, runs.TOKENS[1:])
    top = np.sort(oracle, axis=1)
    must = (top[:, -1] - top[:, -2]) > 2 * e.position_bounds
    same = par.same_top1
    layer_ratio = {k: float(np.abs(gold[k] - e.exact.tensors[k]).max() / np.abs(e.exact.tensors[k]).max()
                            / (e.tensor_bounds()[k])) for k in gold if k != "logits"}
    s = par.summary()
    runs.note(fixture, "llama.cpp vs oracle", {
        "mean_kld": s["mean_kld"], "max_kld": float(par.kld.max()), "kld_bound": e.kld_bound,
        "same_top1": s["same_top1"], "may_differ_positions": int((~must).sum()),
        "max_abs_dlogit": float(diff.max()), "dlogit_bound": e.bound, "error_over_bound": float(diff.max() / e.bound),
        "cosine_min": s["cosine_min"], "cosine_misleading": s["cosine_misleading"],
        "layer_rel_err": {k: float(np.abs(gold[k] - e.exact.tensors[k]).max() / np.abs(e.exact.tensors[k]).max())
                          for k in gold if k != "logits"}
        | {"result_output": float(diff.max() / np.abs(oracle).max())}})
    assert diff.max() <= e.bound, f"{fixture}: max |Δlogit| {diff.max():.3g} > bound {e.bound:.3g}"
    assert par.kld.max() <= e.kld_bound, f"{fixture}: max KLD {par.kld.max():.3g} > bound {e.kld_bound:.3g}"
    bad = np.flatnonzero(must & ~same)
    assert bad.size == 0, f"{fixture}: top-1 differs at positions {bad.tolist()} where the margin forbids it"
    worst = max(layer_ratio, key=layer_ratio.get)
    assert layer_ratio[worst] <= 1.0, f"{fixture}: {worst} is {layer_ratio[worst]:.2f}× its bound"


@pytest.mark.peer
@pytest.mark.parametrize("arch", sorted({a for a, _ in runs.MODELS}))
def test_quantized_twins_kld(arch):
    """KL(F32 ‖ quantized) for the oracle (weight quantization alone) and for llama.cpp (plus its
    activation conversion); more bits, less KL: F16 < Q8_0 < Q4_K, BF16 < Q8_0, for both."""
    base_o, base_l = runs.env(arch, "F32", "llama.cpp-cpu").exact.logits, goldens.load(arch, "F32")["logits"]
    kl = {}
    twins = gguf_gen.wtypes(arch)[1:]
    for wtype in twins:
        o = compare(base_o, runs.env(arch, wtype, "llama.cpp-cpu").exact.logits).kld.mean()
        ll = compare(base_l, goldens.load(arch, wtype)["logits"]).kld.mean()
        kl[wtype] = (float(o), float(ll))
        runs.note(f"{arch}-{wtype}", "KLD vs F32 twin", {"oracle": float(o), "llama.cpp": float(ll)})
    for side in (0, 1):
        seq = [kl[w][side] for w in twins]
        assert seq == sorted(seq) and seq[0] > 0, f"{arch}: twin KLDs not ordered by bits: {kl}"


WRONG = [  # (family, what is wrong, Hparams changes, Arch changes): each must fail the golden check
    ("gemma2", "sliding window on every layer", {}, {"swa_pattern": 1}),
    ("gemma2", "no sliding window", {}, {"swa_pattern": 0}),
    ("gemma2", "window 17 instead of 16", {"window": 17}, {}),
    ("gemma2", "no attention softcap", {"attn_softcap": 0.0}, {}),
    ("gemma2", "no final softcap", {"final_softcap": 0.0}, {}),
    ("qwen3", "RoPE normal instead of NeoX", {}, {"rope_mode": "normal"}),
    ("qwen3", "no q/k head norm", {}, {"qk_norm": False}),
    ("llama", "RoPE NeoX instead of normal", {}, {"rope_mode": "neox"}),
    ("llama", "RoPE base 5e5 instead of 1e4", {"rope_base": 5e5}, {}),
    ("llama", "attention scale 0.1 % high", {"attn_scale": 0.25 * 1.001}, {}),
    ("llama", "RMSNorm eps 1e-5 instead of 1e-6", {"rms_eps": 1e-5}, {}),
    ("gemma3", "local layers on the global RoPE base", {"rope_base_swa": 0.0}, {}),
    ("gemma3", "sliding window on every layer", {"swa_period": 0}, {}),
    ("gemma3", "no sliding window", {"swa_period": 1}, {}),
    ("gemma3", "global RoPE scaling ignored", {"rope_scale": 1.0}, {}),
    ("gemma3", "no q/k head norm", {}, {"qk_norm": False}),
    ("gemma3", "no embedding scale", {}, {"embed_scaled": False}),
    ("gemma3", "final softcap 30 (the file has none)", {"final_softcap": 30.0}, {}),
    ("gemma4", "rope_freqs ignored on the global layers", {}, {"rope_freqs": False}),
    ("gemma4", "v not normalised", {}, {"v_norm": False}),
    ("gemma4", "no per-layer embeddings", {}, {"per_layer_inputs": False}),
    ("gemma4", "no layer_output_scale", {}, {"output_scale": False}),
    ("gemma4", "q scaled by 1/sqrt(head_dim)", {"attn_scale": 0.25}, {}),
    ("gemma4", "final softcap 15 instead of 30", {"final_softcap": 15.0}, {}),
    ("gemma3n", "no Gaussian top-k on the gate", {}, {"sparse_layers": 0}),
    ("gemma3n", "v not normalised", {}, {"v_norm": False}),
    ("gemma3n", "no final softcap (it defaults to 30)", {"final_softcap": 0.0}, {}),
    ("gemma3n", "local layers on the global RoPE base", {"rope_base_swa": 0.0}, {}),
    # the layout variants: gemma3 capped without a window (llama.cpp caps it), gemma4 with per-layer heads
    ("gemma3_final_cap", "no final softcap (the metadata has one, no window)", {"final_softcap": 0.0}, {}),
    ("gemma3_final_cap", "final softcap 30 instead of 15", {"final_softcap": 30.0}, {}),
    ("gemma4_kv_heads", "v not normalised", {}, {"v_norm": False}),
]


@pytest.mark.peer
@pytest.mark.parametrize("arch, wrong, hp, spec", WRONG, ids=[w[1] for w in WRONG])
def test_wrong_semantics_fail_the_golden_check(monkeypatch, arch, wrong, hp, spec):
    """The golden check is right the other way too: an oracle with one semantic slip is rejected
    (on the F32 fixture, where llama.cpp's own error is smallest)."""
    import dataclasses

    from oracle.models import architectures, forward

    e = runs.env(arch, "F32", "llama.cpp-cpu")
    m = runs.model(arch, "F32")
    monkeypatch.setattr(m, "hp", dataclasses.replace(m.hp, **hp))
    base = gguf_gen.base_arch(arch)
    monkeypatch.setitem(architectures.ARCHS, base, dataclasses.replace(architectures.ARCHS[base], **spec))
    diff = np.abs(forward(m, runs.TOKENS).logits - goldens.load(arch, "F32")["logits"]).max()
    assert diff > e.bound, f"{wrong}: max |Δlogit| {diff:.3g} stays within the bound {e.bound:.3g}"


@pytest.mark.peer
def test_gemma4_shared_layers_read_the_right_cache(monkeypatch):
    """gemma4's shared SWA layer attends over the last SWA layer with its own KV (layer 1 of the
    fixture); an oracle whose shared layers read the first SWA layer's cache (layer 0, the same
    geometry) is rejected by the golden check."""
    from oracle.models import architectures

    e = runs.env("gemma4", "F32", "llama.cpp-cpu")
    right = architectures.Hparams.kv_source
    monkeypatch.setattr(architectures.Hparams, "kv_source",
                        lambda hp, il: 0 if right(hp, il) == 1 and il != 1 else right(hp, il))
    logits = forward(runs.model("gemma4", "F32"), runs.TOKENS).logits
    diff = np.abs(logits - goldens.load("gemma4", "F32")["logits"]).max()
    assert diff > e.bound, f"a shared layer reading layer 0's KV: max |Δlogit| {diff:.3g} within {e.bound:.3g}"
