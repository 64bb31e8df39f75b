"""A GGUF checkpoint as an engine loads it: a flat config plus device weights.

Weights are decoded with gpu_impl.quants on the chosen backend (NumPy, or CuPy when ``xp`` is
cupy) and kept in the engine's storage dtype: float32, or float16 for the half-precision
engine. The q, k and v projections are fused into one ``attn_qkv`` matrix per layer (rows: q
heads, then k, then v), the layout project_qkv takes.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpu_impl.quants import dequantize

REQUIRED = object()
# config field -> (GGUF key below "<arch>.", default)
KEYS: dict[str, tuple[str, Any]] = {
    "d_model": ("embedding_length", REQUIRED), "n_layers": ("block_count", REQUIRED),
    "d_ff": ("feed_forward_length", REQUIRED), "heads": ("attention.head_count", REQUIRED),
    "kv_heads": ("attention.head_count_kv", None), "head_dim": ("attention.key_length", None),
    "eps": ("attention.layer_norm_rms_epsilon", REQUIRED), "rope_dims": ("rope.dimension_count", None),
    "rope_theta": ("rope.freq_base", 10000.0), "ctx": ("context_length", REQUIRED),
    "sliding_window": ("attention.sliding_window", 0), "attn_cap": ("attn_logit_softcapping", 0.0),
    "logit_cap": ("final_logit_softcapping", 0.0), "rope_scaling": ("rope.scaling.type", "none"),
    "rope_factor": ("rope.scaling.factor", 1.0),
}
# per family: rope layout, gated activation, extra norms, embedding scale, sliding-window layers
FAMILIES: dict[str, dict[str, Any]] = {
    "llama": {"rope": "normal", "act": "silu"},
    "qwen3": {"rope": "neox", "act": "silu", "head_norm": True},
    "gemma2": {"rope": "neox", "act": "gelu", "sandwich": True, "scale_embd": True, "swa_every_other": True},
}


@dataclass
class Config:
    family: str
    vocab: int
    d_model: int
    n_layers: int
    d_ff: int
    heads: int
    kv_heads: int
    head_dim: int
    eps: float
    rope_dims: int
    rope_theta: float
    rope_freq_scale: float
    ctx: int
    sliding_window: int
    attn_cap: float
    logit_cap: float
    traits: dict[str, Any]

    def rope_args(self) -> dict[str, Any]:
        return {"n_dims": self.rope_dims, "mode": self.traits["rope"], "freq_base": self.rope_theta,
                "freq_scale": self.rope_freq_scale}

    def attn_args(self, layer: int) -> dict[str, Any]:
        # Gemma 2 27B (46 layers) scales queries by d_model / heads, every other size by head_dim
        per_head = self.d_model / self.heads if self.family == "gemma2" and self.n_layers == 46 else self.head_dim
        slide = self.traits.get("swa_every_other") and layer % 2 == 0
        return {"scale": 1.0 / math.sqrt(per_head), "window": self.sliding_window if slide else 0,
                "softcap": self.attn_cap}


def _config(meta: dict[str, Any], vocab_rows: int) -> Config:
    family = meta.get("general.architecture")
    if family not in FAMILIES:
        raise ValueError(f"model family {family!r} is not supported (supported: {', '.join(FAMILIES)})")
    vals: dict[str, Any] = {}
    for name, (key, default) in KEYS.items():
        v = meta.get(f"{family}.{key}")
        if v is None and default is REQUIRED:
            raise ValueError(f"metadata key {family}.{key} is required and missing")
        vals[name] = default if v is None else v
    heads = int(vals["heads"])
    kv_heads = int(vals["kv_heads"] or heads)
    head_dim = int(vals["head_dim"] or int(vals["d_model"]) // heads)
    if vals["rope_scaling"] not in ("none", "linear"):
        raise ValueError(f"rope scaling {vals['rope_scaling']!r} is not implemented (none, linear)")
    factor = float(vals["rope_factor"]) if vals["rope_scaling"] == "linear" else 1.0
    if heads % kv_heads:
        raise ValueError(f"{heads} heads cannot share {kv_heads} KV heads evenly")
    return Config(family=family, vocab=int(meta.get(f"{family}.vocab_size") or vocab_rows),
                  d_model=int(vals["d_model"]), n_layers=int(vals["n_layers"]), d_ff=int(vals["d_ff"]),
                  heads=heads, kv_heads=kv_heads, head_dim=head_dim, eps=float(vals["eps"]),
                  rope_dims=int(vals["rope_dims"] or head_dim), rope_theta=float(vals["rope_theta"]),
                  rope_freq_scale=1.0 / factor, ctx=int(vals["ctx"]), sliding_window=int(vals["sliding_window"]),
                  attn_cap=float(vals["attn_cap"]), logit_cap=float(vals["logit_cap"]), traits=FAMILIES[family])


class Checkpoint:
    """Config + weights on one backend in one storage dtype ("float32" or "float16")."""

    def __init__(self, path: os.PathLike[str] | str, dtype: str = "float32", xp: Any = np) -> None:
        from gguf import GGUFReader

        if dtype not in ("float32", "float16"):
            raise ValueError(f"dtype must be 'float32' or 'float16', got {dtype!r}")
        self.path, self.dtype, self.xp = os.fspath(path), dtype, xp
        try:
            r = GGUFReader(self.path)
        except Exception as exc:  # one clear error for any unreadable file
            raise ValueError(f"{self.path}: cannot read as GGUF: {type(exc).__name__}: {exc}") from None
        meta = {}
        for k, f in r.fields.items():
            try:
                meta[k] = f.contents()
            except Exception:  # unrenderable field: not one this engine reads
                meta[k] = None
        self.raw = {t.name: (int(t.tensor_type), tuple(int(d) for d in t.shape.tolist()[::-1]),
                             np.array(t.data).reshape(-1).view(np.uint8).copy()) for t in r.tensors}
        if "token_embd.weight" not in self.raw:
            raise ValueError(f"{self.path}: token_embd.weight is missing")
        try:
            self.cfg = _config(meta, self.raw["token_embd.weight"][1][0])
        except ValueError as exc:
            raise ValueError(f"{self.path}: {exc}") from None
        self.meta, self._dev = meta, {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._dev:
            self._dev[name] = self._load(name)
        return self._dev[name]

    def _load(self, name: str) -> Any:
        if name == "output.weight" and name not in self.raw:
            return self["token_embd.weight"]  # tied output projection
        if name.endswith("attn_qkv.weight"):
            stem = name[: -len("attn_qkv.weight")]
            return self.xp.concatenate([self[stem + p + ".weight"] for p in ("attn_q", "attn_k", "attn_v")])
        if name not in self.raw:
            raise ValueError(f"{self.path}: tensor {name} is missing")
        qtype, shape, data = self.raw[name]
        w = dequantize(self.xp.asarray(data), qtype, shape)
        return w.astype(self.xp.float16) if self.dtype == "float16" else w
