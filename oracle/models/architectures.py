"""What each supported GGUF architecture means, as llama.cpp builds its graph.

``hparams(kv)`` turns a GGUF key/value table into ``Hparams``; everything the forward pass
needs to know about an architecture is one ``Arch`` record here, so the pass itself has no
per-architecture branches beyond reading these flags.

Conventions taken from llama.cpp (src/models/*.cpp, llama-model.cpp):
- llama: RoPE in the normal (adjacent pairs) layout, SwiGLU MLP, output tied to the embedding
  when ``output.weight`` is absent.
- qwen3: NeoX RoPE, an RMSNorm over each q and k head (``attn_q_norm``/``attn_k_norm``)
  before RoPE.
- gemma2: NeoX RoPE; the embedding times sqrt(n_embd); q scaled by 1/sqrt(head_dim) (by
  1/sqrt(n_embd/n_head) for the 46-layer 27B); attention logits soft-capped; RMSNorm after
  attention and after the MLP as well as before; GeGLU (tanh GELU); final logits soft-capped;
  a sliding window on every even layer (pattern 2: layer il is SWA iff il % 2 == 0); the output
  projection is the embedding. GGUF stores Gemma's norm weights with the +1 already folded in
  (convert_hf_to_gguf adds it), so no unit offset is applied to a GGUF weight.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Arch:
    rope_mode: str
    mlp: str  # "swiglu" or "geglu"
    qk_norm: bool = False
    post_norms: bool = False
    embed_scaled: bool = False
    swa_pattern: int = 0  # 0: no sliding window; n: layer il slides iff il % n < n - 1


ARCHS: dict[str, Arch] = {
    "llama": Arch(rope_mode="normal", mlp="swiglu"),
    "qwen3": Arch(rope_mode="neox", mlp="swiglu", qk_norm=True),
    "gemma2": Arch(rope_mode="neox", mlp="geglu", post_norms=True, embed_scaled=True, swa_pattern=2),
}


@dataclass(frozen=True)
class Hparams:
    arch: str
    n_vocab: int
    n_embd: int
    n_layer: int
    n_head: int
    n_head_kv: int
    head_dim: int
    n_ff: int
    rms_eps: float
    n_rot: int
    rope_base: float
    rope_scale: float
    n_ctx_train: int
    attn_scale: float
    embed_scale: float
    window: int
    attn_softcap: float
    final_softcap: float

    @property
    def spec(self) -> Arch:
        return ARCHS[self.arch]

    def window_of(self, layer: int) -> int:
        """The sliding window of ``layer`` (0: the layer attends to the whole causal past)."""
        n = self.spec.swa_pattern
        return self.window if n and self.window and layer % n < n - 1 else 0


def _get(kv: dict[str, Any], arch: str, key: str, default: Any = None) -> Any:
    v = kv.get(f"{arch}.{key}", default)
    if v is None:
        raise ValueError(f"GGUF metadata lacks {arch}.{key}, which a {arch} model needs")
    return v


def hparams(kv: dict[str, Any], n_vocab_rows: int) -> Hparams:
    """``n_vocab_rows``: rows of token_embd.weight (the vocabulary size when the key is absent)."""
    arch = kv.get("general.architecture")
    if arch not in ARCHS:
        raise ValueError(f"unsupported architecture {arch!r}: the forward pass knows {sorted(ARCHS)}")
    n_embd, n_head = int(_get(kv, arch, "embedding_length")), int(_get(kv, arch, "attention.head_count"))
    n_head_kv = int(_get(kv, arch, "attention.head_count_kv", n_head))
    head_dim = int(_get(kv, arch, "attention.key_length", n_embd // n_head))
    if int(_get(kv, arch, "attention.value_length", head_dim)) != head_dim:
        raise ValueError("key_length != value_length is not supported by the forward pass")
    if n_head % n_head_kv:
        raise ValueError(f"head_count={n_head} is not a multiple of head_count_kv={n_head_kv}")
    n_rot = int(_get(kv, arch, "rope.dimension_count", head_dim))
    scaling = kv.get(f"{arch}.rope.scaling.type", "none")
    if scaling not in ("none", "linear"):
        raise ValueError(f"rope scaling {scaling!r} is not supported by the forward pass (none, linear)")
    factor = float(kv.get(f"{arch}.rope.scaling.factor", 1.0) or 1.0) if scaling == "linear" else 1.0
    n_layer = int(_get(kv, arch, "block_count"))
    gemma_27b = arch == "gemma2" and n_layer == 46
    attn_scale = 1.0 / math.sqrt(n_embd / n_head if gemma_27b else head_dim)
    spec = ARCHS[arch]
    return Hparams(
        arch=arch, n_vocab=int(kv.get(f"{arch}.vocab_size", n_vocab_rows)), n_embd=n_embd, n_layer=n_layer,
        n_head=n_head, n_head_kv=n_head_kv, head_dim=head_dim, n_ff=int(_get(kv, arch, "feed_forward_length")),
        rms_eps=float(_get(kv, arch, "attention.layer_norm_rms_epsilon")), n_rot=n_rot,
        rope_base=float(kv.get(f"{arch}.rope.freq_base", 10000.0)), rope_scale=1.0 / factor,
        n_ctx_train=int(_get(kv, arch, "context_length")), attn_scale=attn_scale,
        embed_scale=math.sqrt(n_embd) if spec.embed_scaled else 1.0,
        window=int(kv.get(f"{arch}.attention.sliding_window", 0) or 0),
        attn_softcap=float(kv.get(f"{arch}.attn_logit_softcapping", 0.0) or 0.0),
        final_softcap=float(kv.get(f"{arch}.final_logit_softcapping", 0.0) or 0.0))
