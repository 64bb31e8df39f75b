"""The transformers config a GGUF file means, as llama.cpp reads it (the oracle's ``Model``).

transformers' GGUF loader (``AutoConfig.from_pretrained(dir, gguf_file=...)``) maps a fixed list
of metadata keys per architecture and leaves every other field at its class default, which is the
value of the released checkpoints. A GGUF whose hyperparameters differ from those checkpoints is
then loaded as another model, silently. ``LOADER_DROPS`` lists what the loader of transformers
5.23 drops, per architecture (the fields ``corrected`` has to set on the tiny fixtures): each one
a defect of the loader, stated with the GGUF key (or llama.cpp's derivation where no key exists)
and the default it leaves. ``corrected`` returns the loader's config with every such field set
from the GGUF, and the corrections it made, so that transformers computes the model llama.cpp and
the oracle compute. ``LOADER_SKIPS`` lists the tensors the loader leaves at their initial
value although the file holds them; ``restore`` copies them in.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oracle.models.architectures import Hparams
from oracle.models.gguf_model import Model

LOADER_DROPS: dict[str, dict[str, str]] = {
    "qwen3": {
        "head_dim": "qwen3.attention.key_length is not in the loader's qwen3 map: head_dim stays 128, "
                    "so any other head size fails to load (a q_proj shape mismatch)",
    },
    "gemma2": {
        "query_pre_attn_scalar": "no GGUF key: llama.cpp scales q by 1/sqrt(key_length) (1/sqrt(n_embd/n_head) "
                                 "for the 46-layer 27B); the loader leaves 256, right only where head_dim is 256 "
                                 "(2B, 9B), wrong for the 27B (144)",
        "attn_logit_softcapping": "gemma2.attn_logit_softcapping is not read: stays 50.0",
        "final_logit_softcapping": "gemma2.final_logit_softcapping is not read: stays 30.0",
    },
    "gemma3": {
        "query_pre_attn_scalar": "no GGUF key: llama.cpp scales q by 1/sqrt(key_length) (1/sqrt(n_embd/n_head) "
                                 "for the 62-layer 27B); the loader leaves 256, wrong for the 27B (168)",
        "layer_types": "gemma3.attention.sliding_window_pattern is not read: the period stays 6",
        "rope_parameters": "gemma3.rope.scaling.type / rope.scaling.factor (linear, global layers) and "
                           "rope.freq_base_swa are not read: the global layers rotate unscaled, the local "
                           "ones at base 10000",
    },
    "gemma4": {
        "head_dim": "gemma4.attention.key_length_swa is not read: the sliding layers' head_dim stays 256 "
                    "(key_length goes to global_head_dim, as it should)",
        "layer_types": "gemma4.attention.sliding_window_pattern (one flag per layer) is not read: the default "
                       "period 6, the last layer forced global",
        "final_logit_softcapping": "gemma4.final_logit_softcapping is not in the loader's gemma4 map: None, the "
                                   "logits uncapped",
        "vocab_size_per_layer_input": "no GGUF key (per_layer_token_embd's rows): stays 262144",
        "hidden_size_per_layer_input": "gemma4.embedding_length_per_layer_input is not read: stays 256",
        "num_kv_shared_layers": "gemma4.attention.shared_kv_layers is not read: stays 0, so the layers that "
                                "reuse an earlier layer's KV get k/v projections of their own, initialised at "
                                "random (the file has none)",
        "attention_k_eq_v": "no GGUF key (a global layer without attn_v, whose v llama.cpp takes from k): "
                            "stays False, so that layer gets a v projection initialised at random",
        "rope_parameters": "rope.freq_base and rope.freq_base_swa are mapped to nothing, and rope_freqs (the "
                           "global layers' rotated quarter) is not read: the defaults (10000 sliding; "
                           "1e6, proportional, partial_rotary_factor 0.25 global) stand whatever the file says",
    },
}
"""Per architecture: HF config field -> what the loader does with the GGUF's value."""
LOADER_SKIPS: dict[str, dict[str, str]] = {
    "gemma4": {
        "layer_scalar": "blk.N.layer_output_scale.weight is not loaded: every layer's output scale stays 1 "
                        "(reported MISSING, loaded anyway)",
    },
}
"""Per architecture: HF parameter (per layer) -> the GGUF tensor the loader leaves unread."""


@dataclass(frozen=True)
class Correction:
    field: str
    loader: Any
    """The loader's value."""
    gguf: Any
    """The value the GGUF means."""


def _rope(base: float, scale: float) -> dict[str, Any]:
    if scale == 1.0:
        return {"rope_theta": base, "rope_type": "default"}
    return {"rope_theta": base, "rope_type": "linear", "factor": 1.0 / scale}


def _query_pre_attn_scalar(hp: Hparams) -> int:
    """transformers scales q by query_pre_attn_scalar**-0.5: the integer whose root is llama.cpp's
    1/attn_scale (head_dim, or n_embd/n_head for the 27B models)."""
    q = round(1.0 / hp.attn_scale**2)
    if abs(q**-0.5 - hp.attn_scale) > 1e-12 * hp.attn_scale:
        raise ValueError(f"attention scale {hp.attn_scale} is 1/sqrt of no integer: not a transformers config")
    return q


def _rotated_fraction(model: Model) -> float:
    """The share of a global head's RoPE pairs that rotate: ``rope_freqs`` factors of 1 (1e30 leaves
    a pair unrotated); 1 where the file has no ``rope_freqs``."""
    if not model.has("rope_freqs.weight"):
        return 1.0
    factors = model.weight("rope_freqs.weight")
    rotated, still = factors == 1.0, factors >= 1e29  # float32's 1e30
    if not (rotated | still).all() or (still[:-1] & rotated[1:]).any():
        raise ValueError(f"rope_freqs {factors.tolist()} is not a rotated prefix: not a transformers config")
    return float(rotated.mean())


def _gemma4(model: Model) -> dict[str, Any]:
    hp = model.hp
    layers = range(hp.n_layer)
    own_kv = [i for i in layers if i < hp.n_layer - hp.n_kv_shared]
    return {"head_dim": hp.head_dim_swa,
            "layer_types": ["sliding_attention" if hp.is_swa(i) else "full_attention" for i in layers],
            "final_logit_softcapping": hp.final_softcap or None,
            "vocab_size_per_layer_input": hp.n_vocab, "hidden_size_per_layer_input": hp.n_embd_per_layer,
            "num_kv_shared_layers": hp.n_kv_shared,
            "attention_k_eq_v": any(not hp.is_swa(i) and not model.has(f"blk.{i}.attn_v.weight") for i in own_kv),
            "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": hp.rope_base_swa},
                                "full_attention": {"rope_type": "proportional",
                                                   "partial_rotary_factor": _rotated_fraction(model),
                                                   "rope_theta": hp.rope_base}}}


def meant(model: Model) -> dict[str, Any]:
    """The config fields ``LOADER_DROPS`` names for the model's architecture, at the values the GGUF means."""
    hp = model.hp
    layers = range(hp.n_layer)
    swa = [hp.is_swa(i) for i in layers]
    if hp.arch == "qwen3":
        return {"head_dim": hp.head_dim}
    if hp.arch == "gemma2":
        return {"query_pre_attn_scalar": _query_pre_attn_scalar(hp),
                "attn_logit_softcapping": hp.attn_softcap or None, "final_logit_softcapping": hp.final_softcap or None}
    if hp.arch == "gemma3":
        local = next((i for i in layers if swa[i]), 0)
        return {"query_pre_attn_scalar": _query_pre_attn_scalar(hp),
                "layer_types": ["sliding_attention" if s else "full_attention" for s in swa],
                "rope_parameters": {"full_attention": _rope(hp.rope_base, hp.rope_scale),
                                    "sliding_attention": _rope(*hp.rope_of(local))}}
    if hp.arch == "gemma4":
        return _gemma4(model)
    return {}


def corrected(path: Path, model: Model, keep: frozenset[str] = frozenset()) -> tuple[Any, list[Correction]]:
    """transformers' config for the GGUF at ``path`` with the fields the loader dropped set from
    ``model`` (the same file read by the oracle), except those in ``keep`` (left at the loader's
    value), and the fields whose value that changed (``keep``'s included)."""
    from transformers import AutoConfig

    cfg = AutoConfig.from_pretrained(path.parent, gguf_file=path.name)
    loaded = cfg.to_dict()  # a per-layer field (gemma4's head_dim) is not an attribute's plain read
    fixes, values = [], {}
    for field, value in meant(model).items():
        if loaded.get(field) != value:
            fixes.append(Correction(field, loaded.get(field), value))
            if field not in keep:
                values[field] = value
    if hasattr(cfg, "per_layer_config"):
        return _rebuilt(cfg, values, model.hp), fixes
    for field, value in values.items():
        setattr(cfg, field, value)
    return cfg, fixes


def _rebuilt(cfg: Any, values: dict[str, Any], hp: Hparams) -> Any:
    """A config with per-layer overrides (gemma4's global layers' head_dim) derives them from
    layer_types when it is built: built again from the corrected fields, the global head size being
    attention.key_length, which the loader reads (global_head_dim)."""
    fields = {k: v for k, v in cfg.to_dict().items()
              if k not in ("per_layer_config", "transformers_version", "architectures", "model_type")}
    return type(cfg)(**(fields | values), global_head_dim=hp.head_dim)


def restore(torch_model: Any, model: Model) -> list[str]:
    """Copy into ``torch_model`` the tensors ``LOADER_SKIPS`` names for its architecture, from the
    GGUF; returns the parameters set."""
    import torch

    done = []
    if "layer_scalar" in LOADER_SKIPS.get(model.hp.arch, {}):
        for i, layer in enumerate(torch_model.model.layers):
            w = model.weight(f"blk.{i}.layer_output_scale.weight")
            layer.layer_scalar.data = torch.tensor(w, dtype=layer.layer_scalar.dtype).reshape(layer.layer_scalar.shape)
            done.append(f"model.layers.{i}.layer_scalar")
    return done
