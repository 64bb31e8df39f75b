"""transformers' forward pass, run for real on the tiny GGUF fixtures (torch on CPU), judged by
``logitcheck layers --error-model`` like any engine's dump.

transformers loads each fixture through its GGUF loader, with the config fields the loader drops
set from the file and the tensors it skips copied in (``gguf_config``: without them gemma2 and
gemma3 are other models, qwen3 and gemma4 do not load). Forward hooks dump every module output that has a llama.cpp graph tensor under its HF
module name (``oracle.models.names.HF_NAMES``; a self-scaling embedding as ``inp_scaled``; q_norm /
k_norm turned token-major from transformers' [batch, heads, tokens, head_dim]), and the logits under
``logits`` where ``lm_head`` is not them (gemma2: a final softcap follows it), into a .npz; the CLI
judges it against the oracle's ``logitcheck forward`` run with the float32 engine's error model
(float32 weights and compute) or, for ``dtype=torch.float16`` / ``torch.bfloat16``,
``transformers-float16`` / ``transformers-bfloat16`` (that storage and the steps transformers rounds
inside its ops: ``error_model.Engine.inner_u``). A correct
engine is "within" (exit status 0); under ``gpu_impl-bfloat16`` (one rounding per op) four of the
six bfloat16 runs are flagged, each for the reason ``SINGLE_ROUNDING_FLAGS`` states (qwen3 and gemma4,
whose ops round once, are within it; ``ROUNDS_ONCE`` pins gemma4).

Pinned beside it: the loader's own config drops exactly ``gguf_config.LOADER_DROPS`` and its
logits are then far off the oracle's (a transformers release that reads those keys fails
here, and the list shrinks), and the corrected float32 logits match within the float32 engine's
bound.
"""
from __future__ import annotations

import numpy as np
import pytest

from properties import recording
from properties.models import runs
from properties.peers.transformers import own_loader
from properties.peers.transformers.gguf_config import LOADER_DROPS, corrected, restore
from reports.cli import main as cli

pytestmark = [pytest.mark.peer]
LOADED = ("llama", "qwen3", "gemma2", "gemma3", "gemma4")
"""Read by transformers' GGUF loader (with ``gguf_config``'s corrections)."""
ARCHS = (*LOADED, *own_loader.NO_LOADER)
WTYPE = "F32"
ENGINE = {"float32": "gpu_impl-float32", "float16": "transformers-float16", "bfloat16": "transformers-bfloat16"}
TABLE: dict[str, dict] = {}
DEFAULT_HOLDS = {"gemma2": {"final_logit_softcapping"}, "gemma4": {"rope_parameters"}}
"""Dropped fields whose transformers default is the fixture's own value (gemma2's final softcap, 30;
gemma4's RoPE bases and rotated quarter, those of the released models)."""
# Imported when the first test runs, not at collection (torch and transformers take seconds).
torch = AutoModelForCausalLM = None


@pytest.fixture(scope="module", autouse=True)
def _peer() -> None:
    global torch, AutoModelForCausalLM
    try:
        import accelerate  # noqa: F401  (transformers needs it to load a GGUF)
        import torch
        from transformers import AutoModelForCausalLM
        from transformers.utils import logging as hf_logging
    except Exception as exc:  # ImportError, or a torch that fails to load
        pytest.skip(f"torch/transformers/accelerate not importable ({exc}); pip install 'logitcheck[engines]'")
    hf_logging.disable_progress_bar()


def _load(arch: str, dtype: str, fix: bool = True):
    if arch in own_loader.NO_LOADER:  # read by this suite into transformers' class, llama.cpp's std swapped in
        return own_loader.llama_cpp_std(own_loader.load(runs.model(arch, WTYPE), getattr(torch, dtype))), []
    path = runs.path(arch, WTYPE)
    cfg, fixes = corrected(path, runs.model(arch, WTYPE))
    kw = {"config": cfg} if fix else {}
    model = AutoModelForCausalLM.from_pretrained(path.parent, gguf_file=path.name, dtype=getattr(torch, dtype), **kw)
    if fix:
        restore(model, runs.model(arch, WTYPE))
    return model.eval(), fixes


def _logits(model) -> np.ndarray:
    with torch.no_grad():
        return model(torch.tensor([runs.TOKENS])).logits[0].double().numpy()


def _name(module_name: str, module) -> str:
    """The dump's name for a module's output: its HF name, except an embedding that scales its own
    output (transformers 5's ``*TextScaledWordEmbedding``, gemma2's included, where the names map
    reads gemma2's ``embed_tokens`` as the unscaled lookup of the 4.x releases): ``inp_scaled``."""
    return "inp_scaled" if module_name == "model.embed_tokens" and hasattr(module, "embed_scale") else module_name


def _dump(model, arch: str) -> dict[str, np.ndarray]:
    """Every module output under its HF name (those ``HF_NAMES`` maps for ``arch``), and the logits."""
    from oracle.models.names import HF_NAMES

    n_layer = runs.model(arch, WTYPE).hp.n_layer
    wanted = {hf.format(i=i) for hf in HF_NAMES[arch].values() for i in range(n_layer)}
    out: dict[str, np.ndarray] = {}

    def keep(name):
        def hook(_module, _inputs, output):
            t = output[0] if isinstance(output, tuple) else output
            if name.endswith(("q_norm", "k_norm")) and t.dim() == 4 and t.shape[2] == len(runs.TOKENS):
                # [batch, heads, tokens, head_dim]; gemma3n's AltUp layers' [streams, batch, tokens, hidden] stays
                t = t.transpose(1, 2)
            out[name] = t.detach().float().numpy()  # bf16 values are exact in float32
        return hook

    handles = [m.register_forward_hook(keep(_name(n, m))) for n, m in model.named_modules() if n in wanted]
    try:
        with torch.no_grad():
            logits = model(torch.tensor([runs.TOKENS])).logits.float().numpy()
    finally:
        for h in handles:
            h.remove()
    if "lm_head" not in out:  # a final softcap follows lm_head: the logits are another tensor
        out["logits"] = logits
    assert len(handles) >= 8 * n_layer, f"only {len(handles)} hooked modules: {sorted(out)}"
    return out


@pytest.fixture(scope="module")
def oracle_runs(tmp_path_factory):
    """``logitcheck forward`` of each fixture (the oracle) over the goldens' tokens, once per arch."""
    where, done = tmp_path_factory.mktemp("oracle"), {}

    def get(arch: str):
        if arch not in done:
            done[arch] = where / f"{arch}.npz"
            assert cli(["forward", str(runs.path(arch, WTYPE)), "--tokens", ",".join(map(str, runs.TOKENS)),
                        "--out", str(done[arch])]) == 0
        return done[arch]
    return get


@pytest.mark.parametrize("arch", own_loader.NO_LOADER)
def test_architecture_without_a_loader(arch):
    """transformers' GGUF loader refuses the file (a release that reads it fails here: judge it
    through ``gguf_config`` then); read by ``own_loader`` with llama.cpp's std divisor, the float32
    logits are within the float32 bound of the oracle's, with transformers' own past it (the
    ledger's gaussian top-k entry)."""
    from transformers import AutoConfig

    path = runs.path(arch, WTYPE)
    with pytest.raises(ValueError, match=own_loader.NO_LOADER[arch]):
        AutoConfig.from_pretrained(path.parent, gguf_file=path.name)
    env = runs.env(arch, WTYPE, "gpu_impl-float32")
    model = own_loader.load(runs.model(arch, WTYPE), torch.float32)
    own = float(np.abs(_logits(model) - env.exact.logits).max())
    llama = float(np.abs(_logits(own_loader.llama_cpp_std(model)) - env.exact.logits).max())
    row = TABLE.setdefault(arch, {})
    row |= {"max |dlogit| std / n (transformers)": own, "max |dlogit| std / (n - 1) (llama.cpp)": llama,
            "float32 bound": env.bound}
    recording.table("transformers_forward", TABLE)
    assert llama <= env.bound < own, row


@pytest.mark.parametrize("arch", LOADED)
def test_loader_drops_the_known_keys(arch):
    """The loader's config lacks exactly ``LOADER_DROPS[arch]``; where it loads at all, its
    logits are past the float32 bound, and the corrected config's are within it."""
    env = runs.env(arch, WTYPE, "gpu_impl-float32")
    _, fixes = corrected(runs.path(arch, WTYPE), runs.model(arch, WTYPE))
    assert {f.field for f in fixes} == set(LOADER_DROPS.get(arch, {})) - DEFAULT_HOLDS.get(arch, set()), fixes
    row = TABLE.setdefault(arch, {})
    row["loader drops"] = {f.field: f"{f.loader!r} -> {f.gguf!r}" for f in fixes}
    try:
        raw = float(np.abs(_logits(_load(arch, "float32", fix=False)[0]) - env.exact.logits).max())
    except Exception as exc:  # the loader's shapes do not match the file's tensors
        raw = f"does not load: {type(exc).__name__}"
    fixed = float(np.abs(_logits(_load(arch, "float32")[0]) - env.exact.logits).max())
    row |= {"max |dlogit| loader config": raw, "max |dlogit| corrected": fixed, "float32 bound": env.bound}
    recording.table("transformers_forward", TABLE)
    if fixes:
        assert isinstance(raw, str) or raw > env.bound, row
    assert fixed <= env.bound, row


GEMMA_NORM_WEIGHT = (
    "transformers holds a Gemma norm weight as bf16(w - 1) (the loader subtracts 1 from the GGUF's 1 + w) and "
    "multiplies by 1 + that in float32: an effective weight 1 + bf16(w - 1), finer than and different from the "
    "bf16(w) the local replay and the matched reference assume. Replayed with transformers' own weight, "
    "attn_post_norm-0 is within 0.4996 bf16 ulp (one correct rounding); with bf16(w), 1.35-1.39 ulp")
SINGLE_ROUNDING_FLAGS = {
    ("llama", "bfloat16"): (
        "the matched bfloat16 reference flags attn_out-0 (x1.12 its residual bound): LlamaRMSNorm rounds the "
        "normalised x to bf16, then multiplies by the bf16 weight and rounds again (weight * x.to(bf16)), two "
        "roundings where the engine model has one; with the norm computed in float32 and rounded once, within at "
        "every tensor (attn_out-0 x0.57). qwen3's norm does the same and stays within (closest x0.84)"),
    ("gemma2", "bfloat16"): (
        "the local replay flags attn_post_norm-0 (x313, 511 elements): " + GEMMA_NORM_WEIGHT + ". With the "
        "weights set to bf16(w) - 1, the local replay flags attn_out-0 (RMS residual x1.11): the eager attention "
        "(softcap needs it) rounds the scores, score/softcap, tanh and x softcap to bf16 and the probabilities to "
        "bf16 before P.V; with both the weights and the attention in float32 (bf16 q, k, v in, output rounded "
        "once), within at every tensor"),
    ("gemma3", "bfloat16"): (
        "the matched bfloat16 reference flags Kcur_normed-0 (x1.16 its residual bound): " + GEMMA_NORM_WEIGHT
        + ". With the weights set to bf16(w) - 1, within at every tensor"),
    ("gemma3n", "bfloat16"): (
        "the local replay flags ffn_out-0 (x2.24): the sparse gate's mean, std and cutoff are computed in "
        "bfloat16 (the std multiplier 1.6448533 itself rounds to 1.6484375), steps gpu_impl takes in float32 "
        "inside its gate; with those statistics in float32 and everything else transformers' own, within at "
        "every tensor"),
}
"""Why gpu_impl's bfloat16 model (every op in float32, rounded once) flags these correct transformers runs
(measured on transformers 5.23, torch 2.13 CPU): the steps transformers rounds inside its ops, which the
``transformers-bfloat16`` model declares (``error_model.Engine.inner_u``)."""
CASES = [(a, d) for a in ARCHS for d in ENGINE]


@pytest.mark.parametrize("arch, dtype", CASES)
def test_forward_dump_is_within(tmp_path, capsys, oracle_runs, arch, dtype):
    """``logitcheck layers REF TEST --model M --error-model ENGINE`` on transformers' dump: rc 0."""
    model, _ = _load(arch, dtype)
    test = tmp_path / "test.npz"
    np.savez(test, tokens=np.asarray(runs.TOKENS), **_dump(model, arch))
    ref = oracle_runs(arch)
    capsys.readouterr()
    rc = cli(["layers", str(ref), str(test), "--model", str(runs.path(arch, WTYPE)), "--error-model", ENGINE[dtype]])
    out = capsys.readouterr().out
    verdict = next((line.strip() for line in out.splitlines() if line.strip().startswith("verdict:")), out[-400:])
    TABLE.setdefault(arch, {})[f"verdict {dtype}"] = verdict
    recording.table("transformers_forward", TABLE)
    assert rc == 0, f"{arch} {dtype}: {verdict}\n{out}"


@pytest.mark.parametrize("arch", sorted(a for a, _ in SINGLE_ROUNDING_FLAGS))
def test_single_rounding_model_flags_transformers_bfloat16(tmp_path, capsys, oracle_runs, arch):
    """The same correct bfloat16 runs under ``gpu_impl-bfloat16`` (an engine that rounds once per op):
    flagged, for the reason ``SINGLE_ROUNDING_FLAGS`` gives: the error model must be the engine's own."""
    model, _ = _load(arch, "bfloat16")
    test = tmp_path / "test.npz"
    np.savez(test, tokens=np.asarray(runs.TOKENS), **_dump(model, arch))
    capsys.readouterr()
    rc = cli(["layers", str(oracle_runs(arch)), str(test), "--model", str(runs.path(arch, WTYPE)),
              "--error-model", "gpu_impl-bfloat16"])
    out = capsys.readouterr().out
    assert rc == 1 and "verdict: structural" in out, (SINGLE_ROUNDING_FLAGS[arch, "bfloat16"], out[-800:])


ROUNDS_ONCE = ("gemma4",)
"""Architectures whose transformers ops round once where gpu_impl's do (Gemma4RMSNorm multiplies the
float32 normalised row by w and rounds once; gemma2/3 hold bf16(w - 1)): their float16 / bfloat16 runs
are within the single-rounding model too."""


@pytest.mark.parametrize("arch, dtype", [(a, d) for a in ROUNDS_ONCE for d in ("float16", "bfloat16")])
def test_single_rounding_model_holds_where_transformers_rounds_once(tmp_path, capsys, oracle_runs, arch, dtype):
    """The same dump under ``gpu_impl-<dtype>``: within (rc 0), the model is not wider than it must be."""
    model, _ = _load(arch, dtype)
    test = tmp_path / "test.npz"
    np.savez(test, tokens=np.asarray(runs.TOKENS), **_dump(model, arch))
    capsys.readouterr()
    rc = cli(["layers", str(oracle_runs(arch)), str(test), "--model", str(runs.path(arch, WTYPE)),
              "--error-model", f"gpu_impl-{dtype}"])
    out = capsys.readouterr().out
    assert rc == 0, out[-800:]
