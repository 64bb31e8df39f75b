"""Replays of the transformers ledger entries (``properties/peers/llama_cpp/findings.py`` holds the
one ledger; entries naming ``engine="transformers"`` replay through these): the fields transformers'
GGUF loader drops (``gguf_config.LOADER_DROPS``), each shown on the tiny float32 fixture.

Each replay loads the fixture with transformers' own loader twice: once with every dropped field
set from the GGUF except the one the entry is about, which keeps the loader's value, and once with
every field set from the GGUF. It returns (the loader's value and the logits' largest distance
from the oracle's with it, the GGUF's value and that distance with it), the distances rounded to
two decimals: the first isolates the one field's effect, the second (0.0) shows it is the whole
difference. Two replays compare the same way on something else: gemma4's layer scales, a tensor the
loader skips (``gguf_config.LOADER_SKIPS``: left at 1, then copied in), and gemma3n's Gaussian top-k
(transformers' std divisor, then llama.cpp's, on the model ``own_loader`` reads).
"""
from __future__ import annotations

from typing import Any, Callable

WTYPE = "F32"
ENGINE = "gpu_impl-float32"
"""The float32 engine whose envelope carries the oracle's float64 logits of the fixture."""


def peer() -> tuple[Any, Any]:
    """torch and transformers' model class; ImportError, with the install line, where the GGUF
    loader cannot run (it needs accelerate)."""
    try:
        import accelerate  # noqa: F401  (transformers' GGUF loader needs it)
        import torch
        from transformers import AutoModelForCausalLM
        from transformers.utils import logging as hf_logging
    except Exception as exc:  # ImportError, or a torch that fails to load
        raise ImportError(f"torch/transformers/accelerate not importable ({exc}); "
                          f"pip install 'logitcheck[engines]'") from exc
    hf_logging.disable_progress_bar()
    return torch, AutoModelForCausalLM


def _logit_distance(arch: str, cfg: Any, restored: bool = True) -> float | str:
    """max |logit - oracle logit| of transformers' float32 forward with ``cfg`` (and, ``restored``,
    the tensors its loader skips copied in), over the goldens' tokens, to two decimals; a config
    whose shapes are not the file's does not load."""
    from properties.models import runs
    from properties.peers.transformers.gguf_config import restore

    torch, model_class = peer()
    path = runs.path(arch, WTYPE)
    torch.manual_seed(0)  # parameters the file lacks are initialised at random: the same ones each replay
    try:
        model = model_class.from_pretrained(path.parent, gguf_file=path.name, dtype=torch.float32, config=cfg)
    except RuntimeError as exc:
        if "mismatch" not in str(exc):
            raise
        return "does not load (tensor shape mismatch)"
    except ValueError as exc:  # the model's own consistency checks (gemma4's KV sharing by layer type)
        return f"does not load (ValueError: {str(exc).split(chr(10))[0]})"
    if restored:
        restore(model, runs.model(arch, WTYPE))
    with torch.no_grad():
        logits = model.eval()(torch.tensor([runs.TOKENS])).logits[0].double().numpy()
    exact = runs.env(arch, WTYPE, ENGINE).exact.logits
    return round(float(abs(logits - exact).max()), 2)


def _field_left_at_loader(arch: str, field: str, show: Callable[[Any], Any] = lambda v: v,
                          label: str = "") -> tuple[dict, dict]:
    """(``field`` at the loader's value, the others from the GGUF; every field from the GGUF)."""
    from properties.models import runs
    from properties.peers.transformers.gguf_config import corrected, meant

    peer()
    model, path = runs.model(arch, WTYPE), runs.path(arch, WTYPE)
    cfg, fixes = corrected(path, model)
    left, _ = corrected(path, model, keep=frozenset({field}))
    loader = next((f.loader for f in fixes if f.field == field), meant(model)[field])  # read: the GGUF's
    key, gap = label or field, "max |dlogit| vs oracle"
    return ({key: show(loader), gap: _logit_distance(arch, left)},
            {key: show(meant(model)[field]), gap: _logit_distance(arch, cfg)})


def qwen3_head_dim() -> tuple[dict, dict]:
    """qwen3.attention.key_length is not read: head_dim 128, the fixture's 16-wide heads fail to load."""
    return _field_left_at_loader("qwen3", "head_dim")


def gemma2_attention_softcap() -> tuple[dict, dict]:
    """gemma2.attn_logit_softcapping is not read (50 instead of 10); nor is the final softcap,
    whose key the loader's gemma2 map lacks (the fixture's 30 is transformers' default)."""
    from transformers.integrations.ggml import GGUF_CONFIG_MAPPING

    from properties.models import runs

    got, want = _field_left_at_loader("gemma2", "attn_logit_softcapping")
    got["loader maps final_logit_softcapping"] = "final_logit_softcapping" in GGUF_CONFIG_MAPPING["gemma2"]
    want["gemma2.final_logit_softcapping in the file"] = runs.model("gemma2", WTYPE).hp.final_softcap
    return got, want


def gemma2_query_scale() -> tuple[dict, dict]:
    """query_pre_attn_scalar stays 256 where llama.cpp scales q by 1/sqrt(head_dim) (16 here)."""
    return _field_left_at_loader("gemma2", "query_pre_attn_scalar")


def gemma3_query_scale() -> tuple[dict, dict]:
    """query_pre_attn_scalar stays 256 where llama.cpp scales q by 1/sqrt(head_dim) (32 here)."""
    return _field_left_at_loader("gemma3", "query_pre_attn_scalar")


def gemma3_sliding_pattern() -> tuple[dict, dict]:
    """gemma3.attention.sliding_window_pattern is not read: period 6, all 3 layers slide."""
    return _field_left_at_loader("gemma3", "layer_types")


def gemma3_rope_scaling() -> tuple[dict, dict]:
    """rope.scaling.type linear / rope.scaling.factor 8 are not read: the global layer rotates unscaled."""
    return _field_left_at_loader("gemma3", "rope_parameters", show=lambda v: v["full_attention"],
                                 label="rope_parameters['full_attention']")


def gemma4_final_softcap() -> tuple[dict, dict]:
    """gemma4.final_logit_softcapping is not in the loader's gemma4 map: the logits go uncapped."""
    return _field_left_at_loader("gemma4", "final_logit_softcapping")


def gemma4_layer_scale() -> tuple[dict, dict]:
    """blk.N.layer_output_scale.weight is not loaded: every layer_scalar stays 1 (the other
    fields set from the GGUF, with and without the file's scales copied in)."""
    from properties.models import runs
    from properties.peers.transformers.gguf_config import corrected

    peer()
    model = runs.model("gemma4", WTYPE)
    cfg, _ = corrected(runs.path("gemma4", WTYPE), model)
    scales = [round(float(model.weight(f"blk.{i}.layer_output_scale.weight")[0]), 4) for i in range(model.hp.n_layer)]
    key, gap = "layer_scalar", "max |dlogit| vs oracle"
    return ({key: [1.0] * len(scales), gap: _logit_distance("gemma4", cfg, restored=False)},
            {key: scales, gap: _logit_distance("gemma4", cfg)})


def gemma4_shared_kv() -> tuple[dict, dict]:
    """gemma4.attention.shared_kv_layers is not read: the sharing layers get random k/v projections."""
    return _field_left_at_loader("gemma4", "num_kv_shared_layers")


def gemma4_v_from_k() -> tuple[dict, dict]:
    """A global layer without attn_v (v from k in llama.cpp) gets a random v projection."""
    return _field_left_at_loader("gemma4", "attention_k_eq_v")


def gemma4_sliding_head_dim() -> tuple[dict, dict]:
    """gemma4.attention.key_length_swa is not read: the sliding layers' head_dim stays 256."""
    return _field_left_at_loader("gemma4", "head_dim")


def gemma4_sliding_pattern() -> tuple[dict, dict]:
    """gemma4.attention.sliding_window_pattern is not read: the default period 6."""
    return _field_left_at_loader("gemma4", "layer_types")


def gemma4_per_layer_input_size() -> tuple[dict, dict]:
    """gemma4.embedding_length_per_layer_input is not read: the per-layer inputs stay 256 wide."""
    return _field_left_at_loader("gemma4", "hidden_size_per_layer_input")


def gemma3n_gaussian_topk_std() -> tuple[dict, dict]:
    """transformers' Gemma 3n divides the gate's std by n, llama.cpp by n - 1 (``own_loader``)."""
    from properties.models import runs
    from properties.peers.transformers import own_loader

    torch, _ = peer()
    model = own_loader.load(runs.model("gemma3n", WTYPE), torch.float32)
    exact = runs.env("gemma3n", WTYPE, ENGINE).exact.logits

    def gap() -> float:
        with torch.no_grad():
            logits = model(torch.tensor([runs.TOKENS])).logits[0].double().numpy()
        return round(float(abs(logits - exact).max()), 2)

    key = "std divisor"
    own = {key: own_loader.STD_DIVISOR["transformers"], "max |dlogit| vs oracle": gap()}
    own_loader.llama_cpp_std(model)
    return own, {key: own_loader.STD_DIVISOR["llama.cpp"], "max |dlogit| vs oracle": gap()}
