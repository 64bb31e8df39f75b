"""The transformers config a GGUF file means, as llama.cpp reads it (the oracle's ``Hparams``).

transformers' GGUF loader (``AutoConfig.from_pretrained(dir, gguf_file=...)``) maps a fixed list
of metadata keys per architecture and leaves every other field at its class default, which is the
value of the released checkpoints. A GGUF whose hyperparameters differ from those checkpoints is
then loaded as another model, silently. ``LOADER_DROPS`` lists what the loader of transformers
5.23 drops, per architecture (the fields ``corrected`` has to set on the tiny fixtures): each one
a defect of the loader, stated with the GGUF key (or llama.cpp's derivation where no key exists)
and the default it leaves. ``corrected`` returns the loader's config with every such field set
from the GGUF, and the corrections it made, so that transformers computes the model llama.cpp and
the oracle compute.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oracle.models.architectures import Hparams

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
}
"""Per architecture: HF config field -> what the loader does with the GGUF's value."""


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


def meant(hp: Hparams) -> dict[str, Any]:
    """The config fields ``LOADER_DROPS`` names for ``hp.arch``, at the values the GGUF means."""
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
    return {}


def corrected(path: Path, hp: Hparams) -> tuple[Any, list[Correction]]:
    """transformers' config for the GGUF at ``path`` with the fields the loader dropped set from
    ``hp`` (the same file read by the oracle), and the fields whose value that changed."""
    from transformers import AutoConfig

    cfg = AutoConfig.from_pretrained(path.parent, gguf_file=path.name)
    fixes = []
    for field, value in meant(hp).items():
        if getattr(cfg, field, None) != value:
            fixes.append(Correction(field, getattr(cfg, field, None), value))
            setattr(cfg, field, value)
    return cfg, fixes
