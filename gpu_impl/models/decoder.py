"""The decoder forward pass as an engine runs it, from gpu_impl.ops: fused QKV projection, one
``attention_step`` per layer (RoPE at the step's positions, append to the layer's KV cache,
attend), gated MLP, final norm and logits.

``Decoder(ckpt)(tokens)`` is one engine step (a prefill of many tokens or a decode of one) and
returns float32 logits; positions continue from the cache. Every op output is kept under
llama.cpp's graph name (``trace``) so that ``logitcheck layers`` can compare it with the
oracle's or llama.cpp's. In the float16 engine every activation is stored in fp16 between ops
(the ops compute in fp32); logits stay fp32.

``ops`` is looked up at call time, so a module with gpu_impl.ops's API (or a mutant of it)
can be run through the same pass. ``where`` names the layer and op being computed, so an
exception can be located.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from gpu_impl.models.checkpoint import Checkpoint


def _host(x: Any) -> np.ndarray:
    return x.get() if hasattr(x, "get") else np.asarray(x)


class Decoder:
    def __init__(self, ckpt: Checkpoint, ops: Any = None, capacity: int | None = None) -> None:
        if ops is None:
            import gpu_impl.ops as ops
        self.ckpt, self.cfg, self.ops, self.xp = ckpt, ckpt.cfg, ops, ckpt.xp
        cap = self.cfg.ctx if capacity is None else int(capacity)
        self.caches = [ops.KVCache(self.cfg.kv_heads, self.cfg.head_dim, cap) for _ in range(self.cfg.n_layers)]
        self.n_past = 0
        self.trace: dict[str, list[np.ndarray]] = {}
        self.where = ("", -1)

    def _store(self, x: Any) -> Any:
        return x.astype(self.xp.float16) if self.ckpt.dtype == "float16" else x

    def _keep(self, name: str, layer: int, x: Any) -> Any:
        """Store in the engine's activation dtype, and remember it under its graph name."""
        x = self._store(x)
        key = f"{name}-{layer}" if layer >= 0 else name
        self.trace.setdefault(key, []).append(_host(x).astype(np.float32).reshape(x.shape[0], -1))
        return x

    def _op(self, name: str, layer: int, fn: Any, *args: Any, **kw: Any) -> Any:
        self.where = (name, layer)
        return self._keep(name, layer, fn(*args, **kw))

    def _layer(self, i: int, x: Any, pos: Any) -> Any:
        c, o, w, t = self.cfg, self.ops, self.ckpt, x.shape[0]
        b = f"blk.{i}."
        h = self._op("attn_norm", i, o.rms_norm, x, w[b + "attn_norm.weight"], c.eps)
        self.where = ("qkv", i)
        q, k, v = o.project_qkv(h, w[b + "attn_qkv.weight"], c.heads, c.kv_heads, c.head_dim)
        want = [(t, c.heads, c.head_dim), (t, c.kv_heads, c.head_dim), (t, c.kv_heads, c.head_dim)]
        if [tuple(a.shape) for a in (q, k, v)] != want:
            raise ValueError(f"project_qkv returned q/k/v of shapes {[tuple(a.shape) for a in (q, k, v)]}, "
                             f"expected {want}")
        q, k, v = self._store(q), self._store(k), self._keep("Vcur", i, v)
        if c.traits.get("head_norm"):
            q = self._op("Qcur_normed", i, o.rms_norm, q, w[b + "attn_q_norm.weight"], c.eps)
            k = self._op("Kcur_normed", i, o.rms_norm, k, w[b + "attn_k_norm.weight"], c.eps)
        a = self._op("kqv_out", i, o.attention_step, self.caches[i], q, k, v, pos, rope=c.rope_args(),
                     **c.attn_args(i)).reshape(t, -1)
        a = self._op("attn_out", i, o.matmul, a, w[b + "attn_output.weight"].T)
        if c.traits.get("sandwich"):
            a = self._op("attn_post_norm", i, o.rms_norm, a, w[b + "post_attention_norm.weight"], c.eps)
        mid = self._op("sa_out" if c.traits.get("sandwich") else "ffn_inp", i, lambda: a + x)
        f = self._op("ffn_norm", i, o.rms_norm, mid, w[b + "ffn_norm.weight"], c.eps)
        gate = self._op("ffn_gate", i, o.matmul, f, w[b + "ffn_gate.weight"].T)
        up = self._op("ffn_up", i, o.matmul, f, w[b + "ffn_up.weight"].T)
        if c.traits["act"] == "gelu":
            act = self._op("ffn_geglu", i, lambda: o.gelu(gate, approximate="tanh") * up)
        else:
            act = self._op("ffn_swiglu", i, o.swiglu, gate, up)
        down = self._op("ffn_out", i, o.matmul, act, w[b + "ffn_down.weight"].T)
        if c.traits.get("sandwich"):
            down = self._op("ffn_post_norm", i, o.rms_norm, down, w[b + "post_ffw_norm.weight"], c.eps)
        return self._op("l_out", i, lambda: down + mid)

    def __call__(self, tokens: Sequence[int] | Any) -> np.ndarray:
        c, o, xp = self.cfg, self.ops, self.xp
        host = np.asarray(tokens.get() if hasattr(tokens, "get") else tokens)
        if host.ndim != 1 or host.size == 0 or host.dtype.kind not in "iu":
            raise ValueError(f"a step needs a non-empty 1-D integer array of token ids, got {host.dtype} {host.shape}")
        if host.min() < 0 or host.max() >= c.vocab:
            raise ValueError(f"token ids must lie in [0, {c.vocab}), got {host.min()}..{host.max()}")
        ids = xp.asarray(host.astype(np.int64))
        pos = xp.arange(self.n_past, self.n_past + ids.shape[0], dtype=xp.int64)
        if c.traits.get("scale_embd"):
            x = self._op("inp_scaled", -1, o.embedding, self.ckpt["token_embd.weight"], ids, scale=c.d_model ** 0.5)
        else:
            x = self._op("embd", -1, o.embedding, self.ckpt["token_embd.weight"], ids)
        for i in range(c.n_layers):
            x = self._layer(i, x, pos)
        n = self._op("result_norm", -1, o.rms_norm, x, self.ckpt["output_norm.weight"], c.eps)
        self.where = ("result_output", -1)
        logits = o.output_logits(n, self.ckpt["output.weight"], c.vocab)
        if c.logit_cap > 0:
            logits = o.softcap(logits, cap=c.logit_cap)
        self.n_past += ids.shape[0]
        out = _host(logits).astype(np.float32)
        self.trace.setdefault("result_output", []).append(out)
        return out

    def tensors(self) -> dict[str, np.ndarray]:
        """Every kept activation, the steps concatenated along tokens."""
        return {k: np.concatenate(v) for k, v in self.trace.items()}


def run(path_or_ckpt: Any, tokens: Sequence[int], *, chunk: int | None = None, dtype: str = "float32",
        ops: Any = None, xp: Any = np) -> dict[str, Any]:
    """Logits ``[T, V]`` and tensors for ``tokens``, fed ``chunk`` at a time (all at once by
    default), on backend ``xp`` (numpy, or cupy for the device); results come back as NumPy."""
    ckpt = path_or_ckpt if isinstance(path_or_ckpt, Checkpoint) else Checkpoint(path_or_ckpt, dtype, xp)
    dec = Decoder(ckpt, ops)
    toks = np.asarray(tokens)
    if toks.ndim != 1 or toks.size == 0 or toks.dtype.kind not in "iu":
        raise ValueError(f"tokens must be a non-empty 1-D integer sequence, got {toks.dtype} {toks.shape}")
    step = toks.size if chunk is None else int(chunk)
    if step < 1:
        raise ValueError(f"chunk must be >= 1, got {chunk}")
    if toks.min() < 0 or toks.max() >= ckpt.cfg.vocab:
        raise ValueError(f"token ids must lie in [0, {ckpt.cfg.vocab}), got {toks.min()}..{toks.max()}")
    logits = np.concatenate([dec(toks[s:s + step]) for s in range(0, toks.size, step)])
    return {"logits": logits, "tensors": dec.tensors()}
