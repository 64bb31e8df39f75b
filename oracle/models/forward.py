"""The float64 forward pass of a GGUF decoder (llama, qwen3, gemma2), built from oracle.ops.

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
from oracle.models.architectures import Hparams
from oracle.models.gguf_model import Model


@dataclass(frozen=True)
class Site:
    name: str
    """llama.cpp's graph name with the layer suffix ("" for an unnamed value)."""
    op: str
    """weight, matmul_input, matmul, get_rows, scale, rms_norm, rope, attention, glu, add, softcap."""
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


Hook = Callable[[Site, np.ndarray], np.ndarray]


@dataclass
class Forward:
    logits: np.ndarray
    tensors: dict[str, np.ndarray]
    positions: np.ndarray
    tokens: np.ndarray


class State:
    """The KV cache of one sequence: one oracle KVCache per layer."""

    def __init__(self, model: Model, capacity: int | None = None) -> None:
        hp = model.hp
        cap = hp.n_ctx_train if capacity is None else int(capacity)
        self.layers = [ops.KVCache(hp.n_head_kv, hp.head_dim, cap) for _ in range(hp.n_layer)]
        self.n_past = 0


def _rope_pairs(hp: Hparams) -> tuple[np.ndarray, np.ndarray]:
    """Per entry of a head: its RoPE pair index (-1 past n_rot) and that pair's frequency."""
    half = hp.n_rot // 2
    idx = np.full(hp.head_dim, -1)
    i = np.arange(half)
    first = 2 * i if hp.spec.rope_mode == "normal" else i
    second = first + 1 if hp.spec.rope_mode == "normal" else i + half
    idx[first], idx[second] = i, i
    freq = np.where(idx >= 0, hp.rope_scale * hp.rope_base ** (-2.0 * np.maximum(idx, 0) / hp.n_rot), 0.0)
    return idx, freq


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

    def linear(self, x: np.ndarray, weight: str, name: str, rows: int | None = None) -> np.ndarray:
        w = self.m.weight(weight)
        w = w if rows is None else w[:rows]
        qt = self.m.qtype(weight)
        if self.hook is not None:
            w = self.hook(Site("", "weight", self.layer, weight, qt, w.shape[1]), w)
            x = self.hook(Site("", "matmul_input", self.layer, weight, qt, w.shape[1]), x)
        return self.emit(name, "matmul", ops.matmul(x, w.T), lambda _: np.abs(x) @ np.abs(w).T,
                         weight=weight, qtype=qt, k=w.shape[1])

    def norm(self, x: np.ndarray, weight: str, name: str) -> np.ndarray:
        return self.emit(name, "rms_norm", ops.rms_norm(x, self.m.weight(weight), self.hp.rms_eps), k=x.shape[-1])

    def _attention_terms(self, q: np.ndarray, cache: ops.KVCache, pos: np.ndarray, attn: dict) -> dict:
        """What attention's rounding scales with: the score sizes, the probabilities and the
        values, per query head (the probabilities from the same scores, softcap and visibility
        that ops.attention uses)."""
        g = q.shape[1] // cache.k.shape[1]
        kk, vv = np.repeat(cache.k, g, axis=1), np.repeat(cache.v, g, axis=1)
        s = attn["scale"] * np.einsum("thd,jhd->thj", q, kk)
        if attn["softcap"] > 0:
            s = ops.softcap(s, attn["softcap"])
        vis = ops.visibility(pos, cache.positions, True, attn["window"])[:, None, :]
        probs = ops.softmax(s, mask=np.where(vis, 0.0, -np.inf))
        score = attn["scale"] * np.einsum("thd,jhd->thj", np.abs(q), np.abs(kk)).max(axis=-1)
        return {"score": score, "weights": probs, "values": vv}

    def block(self, il: int, x: np.ndarray, pos: np.ndarray, cache: ops.KVCache) -> np.ndarray:
        hp, spec, p = self.hp, self.hp.spec, f"blk.{il}."
        self.layer = il
        t = x.shape[0]
        a = self.norm(x, p + "attn_norm.weight", "attn_norm")
        q = self.linear(a, p + "attn_q.weight", "").reshape(t, hp.n_head, hp.head_dim)
        k = self.linear(a, p + "attn_k.weight", "").reshape(t, hp.n_head_kv, hp.head_dim)
        v = self.linear(a, p + "attn_v.weight", "Vcur").reshape(t, hp.n_head_kv, hp.head_dim)
        if spec.qk_norm:
            q = self.norm(q, p + "attn_q_norm.weight", "Qcur_normed")
            k = self.norm(k, p + "attn_k_norm.weight", "Kcur_normed")
        rope = dict(n_dims=hp.n_rot, mode=spec.rope_mode, freq_base=hp.rope_base, freq_scale=hp.rope_scale)
        geo = _rope_pairs(hp) if self.hook else None
        pair_norm = (lambda y: _pair_norm(y, geo[0])) if self.hook else None
        q = self.emit("Qcur", "rope", ops.rope(q, pos, **rope), pair_norm, positions=pos, pairs=geo)
        k = self.emit("Kcur", "rope", ops.rope(k, pos, **rope), pair_norm, positions=pos, pairs=geo)
        cache.append(k, v, pos)
        attn = dict(scale=hp.attn_scale, window=hp.window_of(il), softcap=hp.attn_softcap)
        o = ops.attention(q, cache.k, cache.v, pos, cache.positions, **attn)
        extra = self._attention_terms(q, cache, pos, attn) if self.hook else {}
        o = self.emit("kqv_out", "attention", o.reshape(t, -1), k=len(cache), **extra)
        o = self.linear(o, p + "attn_output.weight", "attn_out")
        if spec.post_norms:
            o = self.norm(o, p + "post_attention_norm.weight", "attn_post_norm")
        r = self.emit("sa_out" if spec.post_norms else "ffn_inp", "add", o + x, lambda _: np.abs(o) + np.abs(x))
        f = self.norm(r, p + "ffn_norm.weight", "ffn_norm")
        g = self.linear(f, p + "ffn_gate.weight", "ffn_gate")
        u = self.linear(f, p + "ffn_up.weight", "ffn_up")
        glu = ops.swiglu(g, u) if spec.mlp == "swiglu" else ops.geglu(g, u, approximate="tanh")
        act = ops.silu if spec.mlp == "swiglu" else ops.gelu
        h = self.emit(f"ffn_{spec.mlp}", "glu", glu, lambda _: (np.abs(g) + np.abs(act(g))) * np.abs(u))
        d = self.linear(h, p + "ffn_down.weight", "ffn_out")
        if spec.post_norms:
            d = self.norm(d, p + "post_ffw_norm.weight", "ffn_post_norm")
        return self.emit("l_out", "add", d + r, lambda _: np.abs(d) + np.abs(r))

    def run(self, ids: np.ndarray, pos: np.ndarray, state: State) -> np.ndarray:
        hp = self.hp
        table = self.m.weight("token_embd.weight")
        x = self.emit("embd", "get_rows", ops.embedding(table, ids), lambda _: np.zeros(1))
        if hp.spec.embed_scaled:
            x = self.emit("inp_scaled", "scale", ops.embedding(table, ids, scale=hp.embed_scale))
        for il in range(hp.n_layer):
            x = self.block(il, x, pos, state.layers[il])
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
