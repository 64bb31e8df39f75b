"""A GGUF checkpoint as an engine loads it: a flat config plus device weights.

Weights are decoded with gpu_impl.quants on the chosen backend (NumPy, or CuPy when ``xp`` is
cupy) and kept in the engine's storage dtype: float32, float16 for the half-precision engine, or
bfloat16 for the bf16 engine (held as float32 arrays whose values are rounded to bfloat16, to the
nearest, ties to even: CuPy has no bfloat16 type, and the ops compute in float32 anyway)
engine. The q, k and v projections are fused into one ``attn_qkv`` matrix per layer (rows: q
heads, then k, then v), the layout project_qkv takes; a Gemma 4 layer stored without ``attn_v``
fuses its k rows twice (its values are its keys).

Per-layer geometry (``Config``): which layers attend through a sliding window (every other
layer for gemma2, a period or a per-layer array from ``attention.sliding_window_pattern`` for
gemma3/gemma4), their head size, rotary dims and RoPE base (``*_swa`` keys), and which layer's
KV cache each layer reads (gemma4's last ``shared_kv_layers`` reuse one: the last local or
global layer that has its own, llama.cpp's n_kv - 2 / n_kv - 1).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpu_impl.quants import dequantize

REQUIRED = object()
DTYPES = ("float32", "float16", "bfloat16")
"""The engine's storage dtypes (every op computes in float32)."""


def round_bf16(xp: Any, x: Any) -> Any:
    """float32 ``x`` rounded to the nearest bfloat16 (ties to even), kept as float32: the high 16
    bits of the float32 pattern after adding half of the dropped part (NaN kept NaN)."""
    x = xp.asarray(x, dtype=xp.float32)
    bits = x.view(xp.uint32)
    rounded = (bits + (xp.uint32(0x7FFF) + ((bits >> 16) & xp.uint32(1)))) & xp.uint32(0xFFFF0000)
    return xp.where(xp.isnan(x), x, rounded.view(xp.float32))


def store(xp: Any, x: Any, dtype: str) -> Any:
    """``x`` as the engine stores it in ``dtype``."""
    if dtype == "float16":
        return x.astype(xp.float16)
    if dtype == "bfloat16":
        return round_bf16(xp, x)
    return x
# config field -> (GGUF key below "<arch>.", default)
KEYS: dict[str, tuple[str, Any]] = {
    "d_model": ("embedding_length", REQUIRED), "n_layers": ("block_count", REQUIRED),
    "d_ff": ("feed_forward_length", REQUIRED), "heads": ("attention.head_count", REQUIRED),
    "kv_heads": ("attention.head_count_kv", None), "head_dim": ("attention.key_length", None),
    "eps": ("attention.layer_norm_rms_epsilon", REQUIRED), "rope_dims": ("rope.dimension_count", None),
    "rope_theta": ("rope.freq_base", 10000.0), "ctx": ("context_length", REQUIRED),
    "sliding_window": ("attention.sliding_window", 0), "attn_cap": ("attn_logit_softcapping", 0.0),
    "logit_cap": ("final_logit_softcapping", 0.0), "rope_scaling": ("rope.scaling.type", "none"),
    "rope_factor": ("rope.scaling.factor", 1.0), "head_dim_local": ("attention.key_length_swa", None),
    "rope_dims_local": ("rope.dimension_count_swa", None), "rope_theta_local": ("rope.freq_base_swa", None),
    "swa_pattern": ("attention.sliding_window_pattern", None), "kv_shared": ("attention.shared_kv_layers", 0),
    "ple_dim": ("embedding_length_per_layer_input", 0),
}
# per family: rope layout, gated activation, extra norms, embedding scale, sliding-window layers
# (default period; whether the metadata's pattern is read), local RoPE base (default; no scaling),
# which softcap keys are read, and Gemma 4's additions
FAMILIES: dict[str, dict[str, Any]] = {
    "llama": {"rope": "normal", "act": "silu"},
    "qwen3": {"rope": "neox", "act": "silu", "head_norm": True},
    "gemma2": {"rope": "neox", "act": "gelu", "sandwich": True, "scale_embd": True, "swa_period": 2,
               "attn_cap": True, "logit_cap": True, "wide_scale_at": 46},
    "gemma3": {"rope": "neox", "act": "gelu", "head_norm": True, "sandwich": True, "scale_embd": True,
               "swa_period": 6, "swa_meta": True, "local_theta": 10000.0, "logit_cap": True, "wide_scale_at": 62},
    "gemma4": {"rope": "neox", "act": "gelu", "head_norm": True, "value_norm": True, "sandwich": True,
               "scale_embd": True, "swa_meta": True, "local_theta": 10000.0, "logit_cap": True, "unit_scale": True,
               "global_freq_factors": True, "per_layer_embd": True, "layer_scale": True, "kv_sharing": True},
    # Gemma 3n: llama.cpp fixes the per-layer width (256), the layers with their own KV (20), the
    # AltUp streams (4, stream 0 active) and the sparse-gate layers (10); the final cap defaults to 30
    "gemma3n": {"rope": "neox", "act": "gelu", "head_norm": True, "value_norm": True, "sandwich": True,
                "scale_embd": True, "swa_period": 5, "swa_meta": True, "local_theta": 10000.0, "logit_cap": True,
                "logit_cap_default": 30.0, "unit_scale": True, "per_layer_embd": True, "ple_width": 256,
                "kv_sharing": True, "kv_layers": 20, "altup": 4, "sparse_layers": 10},
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
    local: tuple[bool, ...] = ()
    """Per layer: attends through the sliding window."""
    head_dim_local: int = 0
    rope_dims_local: int = 0
    rope_theta_local: float = 0.0
    """0: local layers rotate like global ones."""
    kv_shared: int = 0
    ple_dim: int = 0
    head_counts: tuple[int, ...] = ()
    """Per layer: query heads, when the file gives an array (empty: ``heads`` everywhere)."""
    kv_head_counts: tuple[int, ...] = ()
    """Per layer: KV heads, when the file gives an array (empty: ``kv_heads`` everywhere)."""

    def heads_at(self, layer: int) -> int:
        return self.head_counts[layer] if self.head_counts else self.heads

    def kv_heads_at(self, layer: int) -> int:
        return self.kv_head_counts[layer] if self.kv_head_counts else self.kv_heads

    def is_local(self, layer: int) -> bool:
        return bool(self.local) and self.local[layer]

    def dim_at(self, layer: int) -> int:
        """The head size of ``layer``."""
        return self.head_dim_local if self.is_local(layer) else self.head_dim

    def kv_owner(self, layer: int) -> int:
        """The layer whose KV cache ``layer`` attends over."""
        own = self.n_layers - self.kv_shared
        return layer if layer < own else own - (2 if self.is_local(layer) else 1)

    def rope_args(self, layer: int = 0, freq_factors: Any = None) -> dict[str, Any]:
        loc = self.is_local(layer)
        theta, scale = (self.rope_theta_local, 1.0) if loc and self.rope_theta_local else \
            (self.rope_theta, self.rope_freq_scale)
        args = {"n_dims": self.rope_dims_local if loc else self.rope_dims, "mode": self.traits["rope"],
                "freq_base": theta, "freq_scale": scale}
        if freq_factors is not None and not loc:
            args["freq_factors"] = freq_factors
        return args

    def attn_args(self, layer: int) -> dict[str, Any]:
        # Gemma 2 27B (46 layers) and Gemma 3 27B (62) scale queries by d_model / heads, Gemma 3n/4 not
        # at all (their q/k norms set the size), every other model by head_dim
        wide = self.n_layers == self.traits.get("wide_scale_at")
        per_head = self.d_model / self.heads if wide else self.dim_at(layer)
        scale = 1.0 if self.traits.get("unit_scale") else 1.0 / math.sqrt(per_head)
        return {"scale": scale, "window": self.sliding_window if self.is_local(layer) else 0,
                "softcap": self.attn_cap}


def _per_layer(v: Any, n_layers: int, what: str) -> tuple[int, ...]:
    """One value per layer from a key that holds one number or a per-layer array."""
    if isinstance(v, (list, tuple)):
        if len(v) != n_layers:
            raise ValueError(f"{what} has {len(v)} entries for {n_layers} layers")
        return tuple(int(x) for x in v)
    return (int(v),) * n_layers


def _local_layers(family: str, n_layers: int, window: int, pattern: Any) -> tuple[bool, ...]:
    t = FAMILIES[family]
    if not window:
        return (False,) * n_layers
    if t.get("swa_meta") and isinstance(pattern, (list, tuple)):
        if len(pattern) != n_layers:
            raise ValueError(f"sliding_window_pattern has {len(pattern)} entries for {n_layers} layers")
        return tuple(bool(v) for v in pattern)
    if t.get("swa_meta") and pattern is not None:  # from the file: a period of 0 makes every layer local
        p = int(pattern)
        return tuple(p == 0 or i % p < p - 1 for i in range(n_layers))
    period = int(t.get("swa_period", 0))
    return tuple(bool(period) and i % period < period - 1 for i in range(n_layers))


def _config(meta: dict[str, Any], vocab_rows: int) -> Config:
    family = meta.get("general.architecture")
    if family not in FAMILIES:
        raise ValueError(f"model family {family!r} is not supported (supported: {', '.join(FAMILIES)})")
    t = FAMILIES[family]
    vals: dict[str, Any] = {}
    for name, (key, default) in KEYS.items():
        v = meta.get(f"{family}.{key}")
        if v is None and default is REQUIRED:
            raise ValueError(f"metadata key {family}.{key} is required and missing")
        vals[name] = default if v is None else v
    n_layers = int(vals["n_layers"])
    # head counts may be one number or one per layer (Gemma 4's global layers have their own KV heads);
    # the KV count defaults to the query count, layer by layer
    head_counts = _per_layer(vals["heads"], n_layers, "head_count")
    kv_head_counts = _per_layer(vals["kv_heads"], n_layers, "head_count_kv") if vals["kv_heads"] else head_counts
    heads, kv_heads = head_counts[0], kv_head_counts[0]
    head_dim = int(vals["head_dim"] or int(vals["d_model"]) // heads)
    if vals["rope_scaling"] not in ("none", "linear"):
        raise ValueError(f"rope scaling {vals['rope_scaling']!r} is not implemented (none, linear)")
    factor = float(vals["rope_factor"]) if vals["rope_scaling"] == "linear" else 1.0
    for i, (hq, hkv) in enumerate(zip(head_counts, kv_head_counts)):
        if hkv < 1 or hq % hkv:
            raise ValueError(f"layer {i}: {hq} heads cannot share {hkv} KV heads evenly")
    window = int(vals["sliding_window"])
    d_ff = vals["d_ff"]
    rope_dims = int(vals["rope_dims"] or head_dim)
    kv_shared = int(vals["kv_shared"]) if t.get("kv_sharing") else 0
    if t.get("kv_layers"):
        kv_shared = max(0, n_layers - t["kv_layers"])
    if not 0 <= kv_shared < n_layers:
        raise ValueError(f"{kv_shared} shared-KV layers in a model of {n_layers}")
    return Config(family=family, vocab=int(meta.get(f"{family}.vocab_size") or vocab_rows),
                  d_model=int(vals["d_model"]), n_layers=n_layers,
                  d_ff=int(max(d_ff) if isinstance(d_ff, (list, tuple)) else d_ff),
                  heads=heads, kv_heads=kv_heads, head_dim=head_dim, eps=float(vals["eps"]),
                  rope_dims=rope_dims, rope_theta=float(vals["rope_theta"]),
                  rope_freq_scale=1.0 / factor, ctx=int(vals["ctx"]), sliding_window=window,
                  attn_cap=float(vals["attn_cap"]) if t.get("attn_cap") else 0.0,
                  logit_cap=float(meta.get(f"{family}.final_logit_softcapping") or t.get("logit_cap_default", 0.0))
                  if t.get("logit_cap") else 0.0, traits=t,
                  local=_local_layers(family, n_layers, window, vals["swa_pattern"]),
                  head_dim_local=int(vals["head_dim_local"] or head_dim),
                  rope_dims_local=int(vals["rope_dims_local"] or rope_dims),
                  rope_theta_local=float(vals["rope_theta_local"] or t["local_theta"]) if t.get("local_theta") else 0.0,
                  kv_shared=kv_shared,
                  ple_dim=int(t.get("ple_width") or vals["ple_dim"]) if t.get("per_layer_embd") else 0,
                  head_counts=head_counts if len(set(head_counts)) > 1 else (),
                  kv_head_counts=kv_head_counts if len(set(kv_head_counts)) > 1 else ())


class Checkpoint:
    """Config + weights on one backend in one storage dtype ("float32", "float16" or "bfloat16")."""

    def __init__(self, path: os.PathLike[str] | str, dtype: str = "float32", xp: Any = np) -> None:
        from gguf import GGUFReader

        if dtype not in DTYPES:
            raise ValueError(f"dtype must be one of {', '.join(map(repr, DTYPES))}, got {dtype!r}")
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
            v = "attn_v" if stem + "attn_v.weight" in self.raw or not self.cfg.traits.get("kv_sharing") else "attn_k"
            return self.xp.concatenate([self[stem + p + ".weight"] for p in ("attn_q", "attn_k", v)])
        if name not in self.raw:
            raise ValueError(f"{self.path}: tensor {name} is missing")
        qtype, shape, data = self.raw[name]
        w = dequantize(self.xp.asarray(data), qtype, shape)
        # rope_freqs is a frequency table, not a weight: its 1e30 (an unrotated pair) overflows fp16
        if name == "rope_freqs.weight":
            return w
        return store(self.xp, w, self.dtype)
