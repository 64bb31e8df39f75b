"""The float64 forward pass of a GGUF decoder (llama, qwen3, gemma2, gemma3, gemma3n, gemma4), built from oracle.ops.

``forward(model, tokens)`` returns the logits ``[n_tokens, n_vocab]`` and every intermediate
that llama.cpp names in its graph (``attn_norm-0``, ``Qcur-0``, …, ``l_out-1``,
``result_norm``, ``result_output``), each as ``[n_tokens, features]`` so that two passes can
be compared layer by layer whatever their internal layouts.

Incremental decoding: pass a ``State`` (the KV cache of one sequence) and call ``forward``
again with the next tokens; positions continue from what the state holds. ``stepwise`` feeds a
sequence in chunks through one state.

``hook``: an optional ``(Site, value) -> value`` called on every intermediate (and on each
weight product's input, where an engine may convert it). The error models use it to inject the
rounding an engine is allowed; with no hook the pass is exact float64 arithmetic.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from oracle import ops
from oracle.models.architectures import SPARSITY_STD_MUL
from oracle.models.gguf_model import Model


@dataclass(frozen=True)
class Site:
    name: str
    """llama.cpp's graph name with the layer suffix ("" for an unnamed value)."""
    op: str
    """weight, matmul_input, matmul, get_rows, scale, rms_norm, rope, attention, glu, add, softcap,
    cutoff (a row's mean + c·std: Gemma 3n's sparse gate)."""
    layer: int
    weight: str | None = None
    qtype: int | None = None
    k: int = 0
    """A product's reduction length."""
    magnitude: np.ndarray | None = None
    """The size the op's rounding scales with, per output entry: Σ|w·x| for a product,
    (|act(g)| + |g|)·|up| for a gated unit, |a| + |b| for a sum, the pair's norm for RoPE,
    |value| otherwise."""
    positions: np.ndarray | None = None
    pairs: tuple[np.ndarray, np.ndarray] | None = None
    """RoPE: per entry of a head, its pair index (-1: not rotated) and the pair's frequency."""
    score: np.ndarray | None = None
    """Attention: per token and head, the largest scale·Σ|q||k| over the cached keys."""
    weights: np.ndarray | None = None
    """Attention: the probabilities [T, Hq, keys] and the values [keys, Hq, Dv] they average."""
    values: np.ndarray | None = None
    normalized: np.ndarray | None = None
    """RMSNorm: the row divided by its RMS, before the weight."""
    scale: np.ndarray | None = None
    """RMSNorm: the weight the normalised row is multiplied by (None: none)."""
    score_steps: np.ndarray | None = None
    """Attention, per token, head and key: |s_j| before the softcap plus 3·|s_j| after it (its
    divide, tanh and multiply), the sizes an engine rounding the score's steps rounds."""


Hook = Callable[[Site, np.ndarray], np.ndarray]


@dataclass
class Forward:
    logits: np.ndarray
    tensors: dict[str, np.ndarray]
    positions: np.ndarray
    tokens: np.ndarray


class State:
    """The KV cache of one sequence: one oracle KVCache per layer; a layer that shares another
    layer's KV holds that layer's cache object."""

    def __init__(self, model: Model, capacity: int | None = None) -> None:
        hp = model.hp
        cap = hp.n_ctx_train if capacity is None else int(capacity)
        self.layers: list[ops.KVCache] = []
        for il in range(hp.n_layer):
            src = hp.kv_source(il)
            self.layers.append(self.layers[src] if src != il else
                               ops.KVCache(hp.n_head_kv_of(il), hp.head_dim_of(il), cap))
        self.n_past = 0


def _rope_pairs(mode: str, head_dim: int, rope: dict) -> tuple[np.ndarray, np.ndarray]:
    """Per entry of a head: its RoPE pair index (-1 past n_dims) and that pair's frequency."""
    n_rot = rope["n_dims"]
    half = n_rot // 2
    idx = np.full(head_dim, -1)
    i = np.arange(half)
    first = 2 * i if mode == "normal" else i
    second = first + 1 if mode == "normal" else i + half
    idx[first], idx[second] = i, i
    freq = rope["freq_scale"] * rope["freq_base"] ** (-2.0 * np.maximum(idx, 0) / n_rot)
    if rope.get("freq_factors") is not None:
        freq = freq / rope["freq_factors"][np.maximum(idx, 0)]
    return idx, np.where(idx >= 0, freq, 0.0)


def _pair_norm(x: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """|entry| replaced by the norm of its RoPE pair: a rotation's rounding scales with the pair."""
    sq = np.zeros((*x.shape[:-1], idx.max() + 2))
    np.add.at(sq, (..., idx), x * x)  # index -1 collects the pass-through entries, unused
    return np.where(idx >= 0, np.sqrt(sq[..., idx]), np.abs(x))


def _tokens(model: Model, tokens: Sequence[int] | np.ndarray) -> np.ndarray:
    ids = np.asarray(tokens)
    if ids.ndim != 1 or ids.size == 0 or ids.dtype.kind not in "iu":
        raise ValueError(f"tokens must be a non-empty 1-D integer sequence, got {ids.dtype} {ids.shape}")
    bad = ids[(ids < 0) | (ids >= model.hp.n_vocab)]
    if bad.size:
        raise ValueError(f"token id {int(bad[0])} is outside the vocabulary of {model.hp.n_vocab} tokens")
    return ids.astype(np.int64)


def _sum_size(a: np.ndarray, b: np.ndarray) -> Callable:
    return lambda _: np.abs(a) + np.abs(b)


class _Pass:
    def __init__(self, model: Model, hook: Hook | None) -> None:
        self.m, self.hp, self.hook = model, model.hp, hook
        self.rec: dict[str, np.ndarray] = {}
        self.layer = -1

    def emit(self, name: str, op: str, value: np.ndarray, magnitude: Callable | None = None, **info) -> np.ndarray:
        full = f"{name}-{self.layer}" if name and self.layer >= 0 else name
        if self.hook is not None:
            mag = np.abs(value) if magnitude is None else magnitude(value)
            value = self.hook(Site(full, op, self.layer, magnitude=mag, **info), value)
        if full:
            self.rec[full] = value.reshape(value.shape[0], -1)
        return value

    def linear(self, x: np.ndarray, weight: str, name: str, rows: int | None = None,
               part: int | None = None) -> np.ndarray:
        """x · Wᵀ (``part``: the matrix ``W[part]`` of a 3-D weight)."""
        w = self.m.weight(weight)
        w = w if part is None else w[part]
        w = w if rows is None else w[:rows]
        qt = self.m.qtype(weight)
        if self.hook is not None:
            w = self.hook(Site("", "weight", self.layer, weight, qt, w.shape[1]), w)
            x = self.hook(Site("", "matmul_input", self.layer, weight, qt, w.shape[1]), x)
        return self.emit(name, "matmul", ops.matmul(x, w.T), lambda _: np.abs(x) @ np.abs(w).T,
                         weight=weight, qtype=qt, k=w.shape[1])

    def param(self, name: str) -> np.ndarray:
        """A weight that is not a product's matrix (a norm's weight, an output scale), handed to the
        hook as a ``weight`` site: an engine stores it in its own precision too."""
        w = self.m.weight(name)
        if self.hook is not None:
            w = self.hook(Site("", "weight", self.layer, name, self.m.qtype(name), w.shape[-1] if w.ndim else 1), w)
        return w

    def norm(self, x: np.ndarray, weight: str | None, name: str) -> np.ndarray:
        """RMSNorm over the last axis, times ``weight`` (none: the bare normalisation)."""
        w = None if weight is None else self.param(weight)
        info = dict(normalized=ops.rms_norm(x, None, self.hp.rms_eps), scale=w) if self.hook is not None else {}
        return self.emit(name, "rms_norm", ops.rms_norm(x, w, self.hp.rms_eps), k=x.shape[-1], **info)

    def scale(self, x: np.ndarray, s: float | np.ndarray, name: str = "") -> np.ndarray:
        return self.emit(name, "scale", x * s)

    def _attention_terms(self, q: np.ndarray, cache: ops.KVCache, pos: np.ndarray, attn: dict) -> dict:
        """What attention's rounding scales with: the score sizes, the probabilities and the
        values, per query head (the probabilities from the same scores, softcap and visibility
        that ops.attention uses)."""
        g = q.shape[1] // cache.k.shape[1]
        kk, vv = np.repeat(cache.k, g, axis=1), np.repeat(cache.v, g, axis=1)
        raw = s = attn["scale"] * np.einsum("thd,jhd->thj", q, kk)
        if attn["softcap"] > 0:
            s = ops.softcap(s, attn["softcap"])
        vis = ops.visibility(pos, cache.positions, True, attn["window"])[:, None, :]
        probs = ops.softmax(s, mask=np.where(vis, 0.0, -np.inf))
        score = attn["scale"] * np.einsum("thd,jhd->thj", np.abs(q), np.abs(kk)).max(axis=-1)
        steps = np.abs(raw) + (3 * np.abs(s) if attn["softcap"] > 0 else 0.0)
        return {"score": score, "weights": probs, "values": vv, "score_steps": steps}

    def rope_args(self, il: int) -> dict:
        hp, spec = self.hp, self.hp.spec
        base, scale = hp.rope_of(il)
        factors = self.m.weight("rope_freqs.weight") if spec.rope_freqs and not hp.is_swa(il) else None
        return dict(n_dims=hp.n_rot_of(il), mode=spec.rope_mode, freq_base=base, freq_scale=scale,
                    freq_factors=factors)

    def rotate(self, name: str, x: np.ndarray, pos: np.ndarray, rope: dict) -> np.ndarray:
        geo = _rope_pairs(rope["mode"], x.shape[-1], rope) if self.hook else None
        pair_norm = (lambda y: _pair_norm(y, geo[0])) if self.hook else None
        return self.emit(name, "rope", ops.rope(x, pos, **rope), pair_norm, positions=pos, pairs=geo)

    def attention(self, il: int, a: np.ndarray, pos: np.ndarray, cache: ops.KVCache) -> np.ndarray:
        """q (and, in a layer with its own KV, k and v) from the normed input, RoPE, the cache,
        softmax attention; returns [T, n_head·head_dim]."""
        hp, spec, p, t = self.hp, self.hp.spec, f"blk.{il}.", a.shape[0]
        hd = hp.head_dim_of(il)
        q = self.linear(a, p + "attn_q.weight", "").reshape(t, hp.n_head_of(il), hd)
        if spec.qk_norm:
            q = self.norm(q, p + "attn_q_norm.weight", "Qcur_normed")
        rope = self.rope_args(il)
        q = self.rotate("Qcur", q, pos, rope)
        if hp.kv_source(il) == il:
            hkv = hp.n_head_kv_of(il)
            k = self.linear(a, p + "attn_k.weight", "").reshape(t, hkv, hd)
            v = (self.linear(a, p + "attn_v.weight", "Vcur").reshape(t, hkv, hd)
                 if self.m.has(p + "attn_v.weight") or not spec.shared_kv else k)
            if spec.qk_norm:
                k = self.norm(k, p + "attn_k_norm.weight", "Kcur_normed")
            if spec.v_norm:
                v = self.norm(v, None, "Vcur_normed")
            k = self.rotate("Kcur", k, pos, rope)
            cache.append(k, v, pos)
        attn = dict(scale=hp.attn_scale, window=hp.window_of(il), softcap=hp.attn_softcap)
        o = ops.attention(q, cache.k, cache.v, pos, cache.positions, **attn)
        extra = self._attention_terms(q, cache, pos, attn) if self.hook else {}
        return self.emit("kqv_out", "attention", o.reshape(t, -1), k=len(cache), **extra)

    def mlp(self, il: int, r: np.ndarray) -> np.ndarray:
        spec, p = self.hp.spec, f"blk.{il}."
        f = self.norm(r, p + "ffn_norm.weight", "ffn_norm")
        g = self.linear(f, p + "ffn_gate.weight", "ffn_gate")
        u = self.linear(f, p + "ffn_up.weight", "ffn_up")
        if il < spec.sparse_layers:
            g = self.sparse_gate(g)
        glu = ops.swiglu(g, u) if spec.mlp == "swiglu" else ops.geglu(g, u, approximate="tanh")
        act = ops.silu if spec.mlp == "swiglu" else ops.gelu
        h = self.emit(f"ffn_{spec.mlp}", "glu", glu, lambda _: (np.abs(g) + np.abs(act(g))) * np.abs(u))
        return self.linear(h, p + "ffn_down.weight", "ffn_out")

    def sparse_gate(self, g: np.ndarray) -> np.ndarray:
        """Gemma 3n's Gaussian top-k: relu(g - mean - c·std) per row (std with n - 1; c the float32
        constant the engines use)."""
        n = g.shape[-1]
        mean = g.mean(axis=-1, keepdims=True)
        std = np.sqrt(((g - mean) ** 2).sum(axis=-1, keepdims=True) / (n - 1))
        cut = self.emit("", "cutoff", mean + std * float(np.float32(SPARSITY_STD_MUL)), k=n)
        return self.emit("", "add", np.maximum(g - cut, 0.0), _sum_size(g, cut))

    def rescaled(self, y: np.ndarray, target: np.ndarray, name: str = "") -> np.ndarray:
        """y rescaled per token to the norm of ``target`` (AltUp's magnitude matching: a norm's
        rounding)."""
        ny = np.sqrt((y * y).sum(axis=-1, keepdims=True))
        return self.emit(name, "rms_norm", y * np.sqrt((target * target).sum(axis=-1, keepdims=True)) / ny,
                         k=y.shape[-1])

    def stack(self, x: np.ndarray) -> np.ndarray:
        """[T, n_streams, n_embd]: x, then its projections by ``altup_proj`` at x's norm."""
        extra = [self.rescaled(self.linear(x, "altup_proj.weight", "", part=k), x)
                 for k in range(self.hp.spec.altup_streams - 1)]
        return np.stack([x, *extra], axis=1)

    def unstack(self, s: np.ndarray) -> np.ndarray:
        """The mean of stream 0 and streams 1… projected back by ``altup_unembd_proj`` at stream 0's norm."""
        acc = s[:, 0]
        for k in range(1, s.shape[1]):
            u = self.rescaled(self.linear(s[:, k], "altup_unembd_proj.weight", "", part=k - 1), s[:, 0])
            acc = self.emit("", "add", acc + u, _sum_size(acc, u))
        return self.scale(acc, 1.0 / s.shape[1], "unembd_merged")

    def router(self, il: int, x: np.ndarray) -> np.ndarray:
        """[T, n_streams]: tanh(router · RMSNorm(x) / n_embd)."""
        p = f"blk.{il}."
        r = self.scale(self.norm(x, p + "altup_router_norm.weight", ""), 1.0 / self.hp.n_embd)
        z = self.linear(r, p + "altup_router.weight", "")
        return self.emit("", "softcap", np.tanh(z))

    def altup_predict(self, il: int, s: np.ndarray) -> np.ndarray:
        """Every stream plus a mix of all streams, the mix's coefficients from the router."""
        t, n = s.shape[0], s.shape[1]
        c = self.linear(self.router(il, s[:, 0]), f"blk.{il}.altup_predict_coef.weight", "").reshape(t, n, n)
        mix = self.emit("", "matmul", np.einsum("tji,tid->tjd", c, s),
                        lambda _: np.einsum("tji,tid->tjd", np.abs(c), np.abs(s)), k=n)
        return self.emit("predictions", "add", mix + s, _sum_size(mix, s))

    def altup_correct(self, il: int, pred: np.ndarray, out: np.ndarray) -> np.ndarray:
        """Every predicted stream plus (1 + coefficient) × (the block's output − predicted stream 0)."""
        innov = self.emit("innovation", "add", out - pred[:, 0], _sum_size(out, pred[:, 0]))
        c = self.linear(self.router(il, out), f"blk.{il}.altup_correct_coef.weight", "")
        c = self.emit("", "add", c + 1.0, lambda _: np.abs(c) + 1.0)
        step = self.scale(innov[:, None, :], c[:, :, None])
        return self.emit("corrected", "add", step + pred, _sum_size(step, pred))

    def laurel(self, il: int, x: np.ndarray) -> np.ndarray:
        """LAuReL: x + RMSNorm(laurel_r · laurel_l · x)."""
        p = f"blk.{il}."
        low = self.linear(self.linear(x, p + "laurel_l.weight", ""), p + "laurel_r.weight", "")
        low = self.norm(low, p + "laurel_post_norm.weight", "")
        return self.emit("laurel_out", "add", low + x, _sum_size(low, x))

    def altup_block(self, il: int, s: np.ndarray, pos: np.ndarray, cache: ops.KVCache,
                    inputs: np.ndarray) -> np.ndarray:
        """Gemma 3n's block on the AltUp streams [T, n_streams, n_embd]."""
        p = f"blk.{il}."
        self.layer = il
        pred = self.altup_predict(il, s)
        act = pred[:, 0]
        a = self.norm(act, p + "attn_norm.weight", "attn_norm")
        lo = self.laurel(il, a)
        o = self.linear(self.attention(il, a, pos, cache), p + "attn_output.weight", "attn_out")
        o = self.norm(o, p + "post_attention_norm.weight", "attn_post_norm")
        g = self.emit("attn_gated", "add", o + act, _sum_size(o, act))
        r = self.scale(self.emit("", "add", g + lo, _sum_size(g, lo)), 1.0 / np.sqrt(2.0), "attn_laurel")
        d = self.norm(self.mlp(il, r), p + "post_ffw_norm.weight", "ffn_post_norm")
        y = self.emit("attn_ffw_laurel_gated", "add", d + r, _sum_size(d, r))
        c = self.altup_correct(il, pred, y)
        first = self.scale(c[:, 0], self.param(p + "altup_correct_scale.weight"))
        e = self.per_layer_embedding(il, first, inputs)[:, None, :]
        rest = self.emit("", "add", c[:, 1:] + e, _sum_size(c[:, 1:], e))
        out = np.concatenate([c[:, :1], rest], axis=1)
        self.rec[f"l_out-{il}"] = out.reshape(out.shape[0], -1)  # the streams under the block's graph name
        return out

    def per_layer_inputs(self, x: np.ndarray, ids: np.ndarray) -> np.ndarray | None:
        """[T, n_layer, n_embd_per_layer]: each layer's own input, from the per-layer token
        embedding and a projection of the (scaled) embedding; None for a model without them."""
        hp = self.hp
        if not (hp.spec.per_layer_inputs and self.m.has("per_layer_token_embd.weight")):
            return None
        t, e = ids.size, hp.n_embd_per_layer
        rows = self.emit("", "get_rows", ops.embedding(self.m.weight("per_layer_token_embd.weight"), ids),
                         lambda _: np.zeros(1))
        tok = self.scale(rows, np.sqrt(e)).reshape(t, hp.n_layer, e)
        proj = self.scale(self.linear(x, "per_layer_model_proj.weight", ""), 1.0 / np.sqrt(hp.n_embd))
        proj = self.norm(proj.reshape(t, hp.n_layer, e), "per_layer_proj_norm.weight", "per_layer_proj")
        both = self.emit("", "add", proj + tok, _sum_size(proj, tok))
        return self.scale(both, 1.0 / np.sqrt(2.0), "inp_per_layer")

    def per_layer_embedding(self, il: int, y: np.ndarray, inputs: np.ndarray) -> np.ndarray:
        """What the block's per-layer input adds to its output y: gate(y) through tanh GELU, times
        this layer's input, projected back to n_embd and RMS-normed."""
        p = f"blk.{il}."
        g = self.linear(y, p + "inp_gate.weight", "")
        mine = inputs[:, il, :]
        h = self.emit("pe_geglu", "glu", ops.gelu(g) * mine, lambda _: (np.abs(g) + np.abs(ops.gelu(g))) * np.abs(mine))
        return self.norm(self.linear(h, p + "proj.weight", ""), p + "post_norm.weight", "per_layer_embd_out")

    def block(self, il: int, x: np.ndarray, pos: np.ndarray, cache: ops.KVCache,
              inputs: np.ndarray | None) -> np.ndarray:
        spec, p = self.hp.spec, f"blk.{il}."
        self.layer = il
        a = self.norm(x, p + "attn_norm.weight", "attn_norm")
        o = self.linear(self.attention(il, a, pos, cache), p + "attn_output.weight", "attn_out")
        if spec.post_norms:
            o = self.norm(o, p + "post_attention_norm.weight", "attn_post_norm")
        r = self.emit("sa_out" if spec.post_norms else "ffn_inp", "add", o + x, _sum_size(o, x))
        d = self.mlp(il, r)
        if spec.post_norms:
            d = self.norm(d, p + "post_ffw_norm.weight", "ffn_post_norm")
        scaled = spec.output_scale and self.m.has(p + "layer_output_scale.weight")
        y = self.emit("pe_in" if inputs is not None else ("" if scaled else "l_out"), "add", d + r, _sum_size(d, r))
        if inputs is not None:
            e = self.per_layer_embedding(il, y, inputs)
            y = self.emit("" if scaled else "l_out", "add", y + e, _sum_size(y, e))
        if scaled:
            y = self.scale(y, self.param(p + "layer_output_scale.weight")[0], "l_out")
        return y

    def run(self, ids: np.ndarray, pos: np.ndarray, state: State) -> np.ndarray:
        hp = self.hp
        table = self.m.weight("token_embd.weight")
        x = self.emit("embd", "get_rows", ops.embedding(table, ids), lambda _: np.zeros(1))
        if hp.spec.embed_scaled:
            x = self.emit("inp_scaled", "scale", ops.embedding(table, ids, scale=hp.embed_scale))
        del table  # a big model's weights are decoded a layer at a time: do not hold the table through the blocks
        inputs = self.per_layer_inputs(x, ids)
        if hp.spec.altup_streams:
            streams = self.stack(x)
            for il in range(hp.n_layer):
                streams = self.altup_block(il, streams, pos, state.layers[il], inputs)
            self.layer = -1
            x = self.unstack(streams)
        else:
            for il in range(hp.n_layer):
                x = self.block(il, x, pos, state.layers[il], inputs)
        self.layer = -1
        n = self.norm(x, "output_norm.weight", "result_norm")
        if hp.final_softcap > 0:
            z = self.linear(n, self.m.output_name(), "", rows=hp.n_vocab)
            return self.emit("result_output", "softcap", ops.softcap(z, hp.final_softcap))
        return self.linear(n, self.m.output_name(), "result_output", rows=hp.n_vocab)


def forward(model: Model, tokens: Sequence[int] | np.ndarray, *, state: State | None = None,
            hook: Hook | None = None) -> Forward:
    """Run ``tokens`` at positions ``state.n_past …`` (0 … without a state) and return the
    logits and the named intermediates of these tokens."""
    ids = _tokens(model, tokens)
    state = State(model) if state is None else state
    pos = np.arange(state.n_past, state.n_past + ids.size, dtype=np.int64)
    if pos[-1] >= state.layers[0].capacity:
        raise ValueError(f"position {int(pos[-1])} does not fit the KV cache of {state.layers[0].capacity} cells")
    p = _Pass(model, hook)
    logits = p.run(ids, pos, state)
    state.n_past += ids.size
    return Forward(logits, p.rec, pos, ids)


def stepwise(model: Model, tokens: Sequence[int] | np.ndarray, chunk: int = 1, hook: Hook | None = None) -> Forward:
    """Decode ``tokens`` ``chunk`` at a time through one KV cache; the pieces concatenated."""
    ids = _tokens(model, tokens)
    if chunk < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    state = State(model)
    parts = [forward(model, ids[i:i + chunk], state=state, hook=hook) for i in range(0, ids.size, chunk)]
    names = parts[0].tensors.keys()
    return Forward(np.concatenate([f.logits for f in parts]),
                   {n: np.concatenate([f.tensors[n] for f in parts]) for n in names},
                   np.concatenate([f.positions for f in parts]), ids)
