"""What each supported GGUF architecture means, as llama.cpp builds its graph.

``hparams(kv)`` turns a GGUF key/value table into ``Hparams``; everything the forward pass
needs to know about an architecture is one ``Arch`` record here, so the pass itself has no
per-architecture branches beyond reading these flags.

Conventions taken from llama.cpp (src/models/*.cpp, llama-model.cpp, llama-hparams.cpp):
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
- gemma3: gemma2's block with q/k head norms, no attention softcap, and the final cap only when
  the metadata has ``final_logit_softcapping`` (the converter writes it for a model whose
  sliding-window pattern is 1; llama.cpp's gemma3 graph caps with it, windowed or not); sliding-window
  layers in a period read from ``attention.sliding_window_pattern`` (default 6: five local, one
  global); local layers rotate with their own base (``rope.freq_base_swa``, default 10000) and no
  scaling, global layers with ``rope.freq_base`` and the linear ``rope.scaling``; q scaled by
  1/sqrt(head_dim) (1/sqrt(n_embd/n_head) for the 62-layer 27B).
- gemma4: gemma3's block plus: V is RMS-normalised per head without a weight; no q scaling
  (attention scale 1, the q/k norms set the size); local and global layers have their own head
  size (``attention.key_length_swa`` / ``key_length``) and rotary dims; the global layers divide
  their RoPE frequencies by ``rope_freqs.weight`` (a factor of 1e30 leaves a pair unrotated: the
  partial rotation); which layers slide is a per-layer array; the last
  ``attention.shared_kv_layers`` layers compute only q and attend over the KV cache of an earlier
  layer (llama.cpp: a shared SWA layer reads layer n_kv - 2, a shared global one n_kv - 1, n_kv
  the number of layers with their own KV); a layer without ``attn_v`` uses its k projection as
  v; per-layer embeddings: ``per_layer_token_embd`` rows times sqrt(n_embd_per_layer) plus the
  RMS-normed projection ``per_layer_model_proj`` of the scaled embedding (times 1/sqrt(n_embd)),
  the sum times 1/sqrt(2), gate each block's output (after its MLP residual) through
  ``inp_gate`` → tanh-GELU → × this layer's input → ``proj`` → RMSNorm ``post_norm`` → added to
  the residual; then the whole residual is multiplied by ``layer_output_scale``; the final
  logits are soft-capped.
- gemma3n: gemma4's attention (v norm, scale 1, q/k norms) and per-layer inputs (of a fixed 256,
  llama.cpp's n_embd_altup), a default window period of 5, no rope_freqs, KV of its own in the
  first 20 layers (llama.cpp's fixed n_layer_kv_from_start), a final cap that defaults to 30; and
  AltUp: the residual is 4 streams, stream 0 the scaled embedding and stream k its projection by
  ``altup_proj[k-1]`` rescaled to stream 0's norm per token; each block predicts every stream as
  itself plus a mix of all streams (coefficients ``altup_predict_coef`` · tanh(``altup_router`` ·
  RMSNorm(stream 0) / n_embd)), runs attention and the MLP on predicted stream 0 with LAuReL
  (``laurel_r``·``laurel_l``·x, RMS-normed, plus x, averaged with the attention branch by 1/√2),
  the first 10 layers' gate through a Gaussian top-k (relu(g − mean − 1.6448536·std), std with
  n − 1), then corrects every stream by (1 + ``altup_correct_coef`` · router(output)) × (output −
  predicted stream 0), and adds the per-layer embedding (of corrected stream 0 ×
  ``altup_correct_scale``) to streams 1…3; the output is the mean of stream 0 and streams 1…3
  projected by ``altup_unembd_proj`` and rescaled to stream 0's norm.
Generic (every architecture, llama-model.cpp): ``attention.key_length_swa`` and
``rope.dimension_count_swa`` give the local layers' head size and rotary dims (default: the
global ones); ``attention.head_count`` and ``attention.head_count_kv`` may be per-layer arrays
(get_key_or_arr: one entry per layer; head_count_kv defaults to head_count layer by layer).
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
    v_norm: bool = False
    """V RMS-normalised per head without a weight."""
    post_norms: bool = False
    embed_scaled: bool = False
    swa_pattern: int = 0
    """0: no sliding window; n: layer il slides iff il % n < n - 1."""
    swa_pattern_key: bool = False
    """The period (or a per-layer array) is read from ``attention.sliding_window_pattern``."""
    local_rope_base: float = 0.0
    """0: local layers rotate like global ones; else their default base (``rope.freq_base_swa``
    overrides it), without rope scaling. gemma3n and gemma4 files without the key, or with a
    linear ``rope.scaling`` for the global layers, rotate so in llama.cpp (not at the global base and
    scale its generic loader would give them: properties/models/test_hparams.py)."""
    attn_softcap: bool = False
    """Reads ``attn_logit_softcapping`` (otherwise no cap whatever the metadata says)."""
    final_softcap: bool = False
    """Reads ``final_logit_softcapping``."""
    q_scale_one: bool = False
    """Attention scale 1 instead of 1/sqrt(head_dim)."""
    wide_scale_layers: int = 0
    """The layer count of the variant whose q is scaled by 1/sqrt(n_embd/n_head)."""
    rope_freqs: bool = False
    """Global layers divide their RoPE frequencies by ``rope_freqs.weight``."""
    per_layer_inputs: bool = False
    """Per-layer embeddings (``per_layer_token_embd`` …) when the model has them."""
    output_scale: bool = False
    """Each block's output times ``blk.N.layer_output_scale`` when the model has it."""
    shared_kv: bool = False
    """Reads ``attention.shared_kv_layers``; a layer without ``attn_v`` takes v from k."""
    final_softcap_default: float = 0.0
    """The final cap when the metadata has none."""
    per_layer_dim: int = 0
    """The per-layer input size when the architecture fixes it (else ``embedding_length_per_layer_input``)."""
    kv_layers: int = 0
    """The layers with their own KV when the architecture fixes it (else ``attention.shared_kv_layers``)."""
    altup_streams: int = 0
    """AltUp: the residual as this many streams (stream 0 active), with LAuReL and sparse gates."""
    sparse_layers: int = 0
    """The first layers whose MLP gate goes through the Gaussian top-k."""
    graph_aliases: tuple[tuple[str, str], ...] = ()
    """(llama.cpp's graph name in this architecture, the common name): where its graph names a
    tensor differently from the others (gemma4 calls the rotated q and k ``Qcur_pos``/``Kcur_pos``,
    its raw projections ``Qcur``/``Kcur``, and the attention residual ``attn_out``)."""


ARCHS: dict[str, Arch] = {
    "llama": Arch(rope_mode="normal", mlp="swiglu"),
    "qwen3": Arch(rope_mode="neox", mlp="swiglu", qk_norm=True),
    "gemma2": Arch(rope_mode="neox", mlp="geglu", post_norms=True, embed_scaled=True, swa_pattern=2,
                   attn_softcap=True, final_softcap=True, wide_scale_layers=46),
    "gemma3": Arch(rope_mode="neox", mlp="geglu", qk_norm=True, post_norms=True, embed_scaled=True, swa_pattern=6,
                   swa_pattern_key=True, local_rope_base=10000.0, final_softcap=True, wide_scale_layers=62),
    "gemma4": Arch(rope_mode="neox", mlp="geglu", qk_norm=True, v_norm=True, post_norms=True, embed_scaled=True,
                   swa_pattern_key=True, local_rope_base=10000.0, final_softcap=True, q_scale_one=True,
                   rope_freqs=True, per_layer_inputs=True, output_scale=True, shared_kv=True,
                   graph_aliases=(("Qcur_pos", "Qcur"), ("Kcur_pos", "Kcur"), ("attn_out", "sa_out"))),
    "gemma3n": Arch(rope_mode="neox", mlp="geglu", qk_norm=True, v_norm=True, post_norms=True, embed_scaled=True,
                    swa_pattern=5, swa_pattern_key=True, local_rope_base=10000.0, final_softcap=True,
                    final_softcap_default=30.0, q_scale_one=True, per_layer_inputs=True, per_layer_dim=256,
                    kv_layers=20, shared_kv=True, altup_streams=4, sparse_layers=10,
                    graph_aliases=(("Qcur_pos", "Qcur"), ("Kcur_pos", "Kcur"),
                                   ("first_prediction_out", "per_layer_embd_out"))),
}
SPARSITY_STD_MUL = 1.6448533535003662
"""Gemma 3n's Gaussian top-k cutoff in standard deviations: the normal distribution's 0.95 quantile."""


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
    head_dim_swa: int = 0
    """0: as head_dim."""
    n_rot_swa: int = 0
    """0: as n_rot."""
    rope_base_swa: float = 0.0
    """0: local layers rotate like global ones (rope_base, rope_scale)."""
    swa_period: int | None = None
    """From the metadata (0: every layer slides, as llama.cpp reads it); None: the architecture's default."""
    swa_layers: tuple[bool, ...] | None = None
    """A per-layer sliding-window array from the metadata."""
    n_kv_shared: int = 0
    n_embd_per_layer: int = 0
    heads: tuple[int, ...] | None = None
    """Per-layer query head counts, when ``attention.head_count`` is an array (None: n_head everywhere)."""
    kv_heads: tuple[int, ...] | None = None
    """Per-layer KV head counts, when ``attention.head_count_kv`` is an array (Gemma 4's 26B/31B:
    its global layers have their own ``num_global_key_value_heads``); None: n_head_kv everywhere."""

    def n_head_of(self, layer: int) -> int:
        return self.heads[layer] if self.heads is not None else self.n_head

    def n_head_kv_of(self, layer: int) -> int:
        return self.kv_heads[layer] if self.kv_heads is not None else self.n_head_kv

    @property
    def spec(self) -> Arch:
        return ARCHS[self.arch]

    def is_swa(self, layer: int) -> bool:
        if not self.window:
            return False
        if self.swa_layers is not None:
            return bool(self.swa_layers[layer])
        if self.swa_period is not None:  # llama.cpp's set_swa_pattern: a period of 0 slides every layer
            return self.swa_period == 0 or layer % self.swa_period < self.swa_period - 1
        n = self.spec.swa_pattern
        return bool(n) and layer % n < n - 1

    def window_of(self, layer: int) -> int:
        """The sliding window of ``layer`` (0: the layer attends to the whole causal past)."""
        return self.window if self.is_swa(layer) else 0

    def head_dim_of(self, layer: int) -> int:
        return self.head_dim_swa if self.is_swa(layer) and self.head_dim_swa else self.head_dim

    def n_rot_of(self, layer: int) -> int:
        return self.n_rot_swa if self.is_swa(layer) and self.n_rot_swa else self.n_rot

    def rope_of(self, layer: int) -> tuple[float, float]:
        """(freq_base, freq_scale) of ``layer``."""
        if self.is_swa(layer) and self.rope_base_swa:
            return self.rope_base_swa, 1.0
        return self.rope_base, self.rope_scale

    def kv_source(self, layer: int) -> int:
        """The layer whose KV cache ``layer`` attends over (itself unless it shares one)."""
        n_kv = self.n_layer - self.n_kv_shared
        if layer < n_kv:
            return layer
        return n_kv - (2 if self.is_swa(layer) else 1)


def _get(kv: dict[str, Any], arch: str, key: str, default: Any = None) -> Any:
    v = kv.get(f"{arch}.{key}", default)
    if v is None:
        raise ValueError(f"GGUF metadata lacks {arch}.{key}, which a {arch} model needs")
    return v


def _widest(v: Any) -> int:
    """A per-layer array (gemma4's wider MLP in its shared-KV layers) or one value."""
    return int(max(v)) if isinstance(v, (list, tuple)) else int(v)


def _per_layer(v: Any, n_layer: int, what: str) -> tuple[int, tuple[int, ...] | None]:
    """(layer 0's value, the per-layer tuple or None) of a key that may be one value or an array
    (llama.cpp's get_key_or_arr: an array must have one entry per layer)."""
    if isinstance(v, (list, tuple)):
        if len(v) != n_layer:
            raise ValueError(f"{what} has {len(v)} entries for {n_layer} layers")
        arr = tuple(int(x) for x in v)
        return arr[0], arr
    return int(v), None


def _swa(kv: dict[str, Any], arch: str, n_layer: int) -> tuple[int | None, tuple[bool, ...] | None]:
    """(period, per-layer array) from ``attention.sliding_window_pattern``, when the arch reads it."""
    if not ARCHS[arch].swa_pattern_key:
        return None, None
    v = kv.get(f"{arch}.attention.sliding_window_pattern")
    if v is None:
        return None, None
    if isinstance(v, (list, tuple)):
        if len(v) != n_layer:
            raise ValueError(f"sliding_window_pattern has {len(v)} entries for {n_layer} layers")
        return None, tuple(bool(b) for b in v)
    return int(v), None


def hparams(kv: dict[str, Any], n_vocab_rows: int) -> Hparams:
    """``n_vocab_rows``: rows of token_embd.weight (the vocabulary size when the key is absent)."""
    arch = kv.get("general.architecture")
    if arch not in ARCHS:
        raise ValueError(f"unsupported architecture {arch!r}: the forward pass knows {sorted(ARCHS)}")
    spec = ARCHS[arch]
    n_embd, n_layer = int(_get(kv, arch, "embedding_length")), int(_get(kv, arch, "block_count"))
    n_head, heads = _per_layer(_get(kv, arch, "attention.head_count"), n_layer, "attention.head_count")
    # llama.cpp: head_count_kv defaults to head_count, layer by layer
    n_head_kv, kv_heads = _per_layer(_get(kv, arch, "attention.head_count_kv", heads or n_head), n_layer,
                                     "attention.head_count_kv")
    if heads is not None and kv_heads is None:
        kv_heads = (n_head_kv,) * n_layer
    head_dim = int(_get(kv, arch, "attention.key_length", n_embd // n_head))
    if int(_get(kv, arch, "attention.value_length", head_dim)) != head_dim:
        raise ValueError("key_length != value_length is not supported by the forward pass")
    head_dim_swa = int(_get(kv, arch, "attention.key_length_swa", head_dim))
    if int(_get(kv, arch, "attention.value_length_swa", head_dim_swa)) != head_dim_swa:
        raise ValueError("key_length_swa != value_length_swa is not supported by the forward pass")
    for il in range(n_layer):
        hq, hkv = (heads or (n_head,) * n_layer)[il], (kv_heads or (n_head_kv,) * n_layer)[il]
        if hkv < 1 or hq % hkv:
            raise ValueError(f"layer {il}: head_count={hq} is not a multiple of head_count_kv={hkv}")
    n_rot = int(_get(kv, arch, "rope.dimension_count", head_dim))
    scaling = kv.get(f"{arch}.rope.scaling.type", "none")
    if scaling not in ("none", "linear"):
        raise ValueError(f"rope scaling {scaling!r} is not supported by the forward pass (none, linear)")
    factor = float(kv.get(f"{arch}.rope.scaling.factor", 1.0) or 1.0) if scaling == "linear" else 1.0
    period, layers = _swa(kv, arch, n_layer)
    per_head = n_embd / n_head if n_layer == spec.wide_scale_layers else head_dim
    rope_base = float(kv.get(f"{arch}.rope.freq_base", 10000.0))
    base_swa = float(kv.get(f"{arch}.rope.freq_base_swa", spec.local_rope_base)) if spec.local_rope_base else 0.0
    n_shared = int(kv.get(f"{arch}.attention.shared_kv_layers", 0) or 0) if spec.shared_kv else 0
    if spec.kv_layers:
        n_shared = max(0, n_layer - spec.kv_layers)
    if not 0 <= n_shared < n_layer:
        raise ValueError(f"shared_kv_layers={n_shared} must lie in [0, {n_layer})")
    return Hparams(
        arch=arch, n_vocab=int(kv.get(f"{arch}.vocab_size", n_vocab_rows)), n_embd=n_embd, n_layer=n_layer,
        n_head=n_head, n_head_kv=n_head_kv, head_dim=head_dim, n_ff=_widest(_get(kv, arch, "feed_forward_length")),
        rms_eps=float(_get(kv, arch, "attention.layer_norm_rms_epsilon")), n_rot=n_rot,
        rope_base=rope_base, rope_scale=1.0 / factor,
        n_ctx_train=int(_get(kv, arch, "context_length")),
        attn_scale=1.0 if spec.q_scale_one else 1.0 / math.sqrt(per_head),
        embed_scale=math.sqrt(n_embd) if spec.embed_scaled else 1.0,
        window=int(kv.get(f"{arch}.attention.sliding_window", 0) or 0),
        attn_softcap=float(kv.get(f"{arch}.attn_logit_softcapping", 0.0) or 0.0) if spec.attn_softcap else 0.0,
        final_softcap=float(kv.get(f"{arch}.final_logit_softcapping", spec.final_softcap_default) or 0.0)
        if spec.final_softcap else 0.0,
        head_dim_swa=head_dim_swa, n_rot_swa=int(_get(kv, arch, "rope.dimension_count_swa", n_rot)),
        rope_base_swa=base_swa, swa_period=period, swa_layers=layers, n_kv_shared=n_shared,
        n_embd_per_layer=(spec.per_layer_dim or int(kv.get(f"{arch}.embedding_length_per_layer_input", 0) or 0))
        if spec.per_layer_inputs else 0,
        heads=heads, kv_heads=kv_heads)
