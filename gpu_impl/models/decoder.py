"""The decoder forward pass as an engine runs it, from gpu_impl.ops: fused QKV projection, one
``attention_step`` per layer (RoPE at the step's positions, append to the layer's KV cache,
attend), gated MLP, final norm and logits.

Gemma 3n runs its blocks on the AltUp streams (``_altup_stack`` … ``_altup_layer`` …
``_altup_merge``, with ``_laurel`` and the sparse gate ``_gaussian_topk``). Gemma 4's steps are
methods of their own (``_attend`` with its shared-KV and v-norm paths,
``_per_layer_inputs``, ``_per_layer_embedding``, ``_output_scale``), so a mutant can replace one
step: the per-layer inputs are computed once per step from the scaled embedding and read by each
block after its MLP residual.

``Decoder(ckpt)(tokens)`` is one engine step (a prefill of many tokens or a decode of one) and
returns float32 logits; positions continue from the cache. Every op output is kept under
llama.cpp's graph name (``trace``) so that ``logitcheck layers`` can compare it with the
oracle's or llama.cpp's. In the float16 engine every activation is stored in fp16 between ops
(the ops compute in fp32); in the bfloat16 engine, rounded to bfloat16; logits stay fp32.

``ops`` is looked up at call time, so a module with gpu_impl.ops's API (or a mutant of it)
can be run through the same pass. ``where`` names the layer and op being computed, so an
exception can be located.
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from gpu_impl.models.checkpoint import Checkpoint, store


def _host(x: Any) -> np.ndarray:
    return x.get() if hasattr(x, "get") else np.asarray(x)


class Decoder:
    def __init__(self, ckpt: Checkpoint, ops: Any = None, capacity: int | None = None) -> None:
        if ops is None:
            import gpu_impl.ops as ops
        self.ckpt, self.cfg, self.ops, self.xp = ckpt, ckpt.cfg, ops, ckpt.xp
        cap = self.cfg.ctx if capacity is None else int(capacity)
        self.caches: list[Any] = []
        for i in range(self.cfg.n_layers):  # a layer sharing KV holds its owner's cache object
            owner = self.cfg.kv_owner(i)
            self.caches.append(self.caches[owner] if owner != i else
                               ops.KVCache(self.cfg.kv_heads_at(i), self.cfg.dim_at(i), cap))
        self.n_past = 0
        self.ple: Any = None
        self.trace: dict[str, list[np.ndarray]] = {}
        self.where = ("", -1)

    def _store(self, x: Any) -> Any:
        return store(self.xp, x, self.ckpt.dtype)

    def _keep(self, name: str, layer: int, x: Any) -> Any:
        """Store in the engine's activation dtype, and remember it under its graph name."""
        x = self._store(x)
        key = f"{name}-{layer}" if layer >= 0 else name
        self.trace.setdefault(key, []).append(_host(x).astype(np.float32).reshape(x.shape[0], -1))
        return x

    def _op(self, name: str, layer: int, fn: Any, *args: Any, **kw: Any) -> Any:
        self.where = (name, layer)
        return self._keep(name, layer, fn(*args, **kw))

    def _attend(self, i: int, h: Any, pos: Any) -> Any:
        """Attention of layer ``i`` over its KV cache: [T, heads·head_dim]."""
        c, o, w, t = self.cfg, self.ops, self.ckpt, h.shape[0]
        b, hd, nq, nkv = f"blk.{i}.", c.dim_at(i), c.heads_at(i), c.kv_heads_at(i)
        factors = w["rope_freqs.weight"] if c.traits.get("global_freq_factors") else None
        rope = c.rope_args(i, factors)
        if c.kv_owner(i) != i:  # q only; the owner layer already appended this step's keys
            self.where = ("Qcur", i)
            q = self._store(o.matmul(h, w[b + "attn_q.weight"].T).reshape(t, nq, hd))
            q = self._op("Qcur_normed", i, o.rms_norm, q, w[b + "attn_q_norm.weight"], c.eps)
            q = self._store(o.rope(q, pos, **rope))
            return self._op("kqv_out", i, o.attention_decode, self.caches[i], q, pos, **c.attn_args(i)).reshape(t, -1)
        self.where = ("qkv", i)
        q, k, v = o.project_qkv(h, w[b + "attn_qkv.weight"], nq, nkv, hd)
        want = [(t, nq, hd), (t, nkv, hd), (t, nkv, hd)]
        if [tuple(a.shape) for a in (q, k, v)] != want:
            raise ValueError(f"project_qkv returned q/k/v of shapes {[tuple(a.shape) for a in (q, k, v)]}, "
                             f"expected {want}")
        q, k, v = self._store(q), self._store(k), self._keep("Vcur", i, v)
        if c.traits.get("head_norm"):
            q = self._op("Qcur_normed", i, o.rms_norm, q, w[b + "attn_q_norm.weight"], c.eps)
            k = self._op("Kcur_normed", i, o.rms_norm, k, w[b + "attn_k_norm.weight"], c.eps)
        if c.traits.get("value_norm"):
            v = self._op("Vcur_normed", i, o.rms_norm, v, None, c.eps)
        return self._op("kqv_out", i, o.attention_step, self.caches[i], q, k, v, pos, rope=rope,
                        **c.attn_args(i)).reshape(t, -1)

    def _mlp(self, i: int, mid: Any) -> Any:
        c, o, w = self.cfg, self.ops, self.ckpt
        b = f"blk.{i}."
        f = self._op("ffn_norm", i, o.rms_norm, mid, w[b + "ffn_norm.weight"], c.eps)
        gate = self._op("ffn_gate", i, o.matmul, f, w[b + "ffn_gate.weight"].T)
        up = self._op("ffn_up", i, o.matmul, f, w[b + "ffn_up.weight"].T)
        if i < c.traits.get("sparse_layers", 0):
            gate = self._op("ffn_gate_sparse", i, self._gaussian_topk, gate)
        if c.traits["act"] == "gelu":
            act = self._op("ffn_geglu", i, lambda: o.gelu(gate, approximate="tanh") * up)
        else:
            act = self._op("ffn_swiglu", i, o.swiglu, gate, up)
        return self._op("ffn_out", i, o.matmul, act, w[b + "ffn_down.weight"].T)

    def _per_layer_inputs(self, x: Any, ids: Any) -> Any:
        """Gemma 4: every layer's own input [T, n_layers, ple_dim] = (RMSNorm(x·P / √d_model) +
        E_ple[ids]·√ple_dim) / √2, from the scaled embedding x."""
        c, o, w, t = self.cfg, self.ops, self.ckpt, x.shape[0]
        shape = (t, c.n_layers, c.ple_dim)
        self.where = ("per_layer_proj", -1)
        proj = o.matmul(x, w["per_layer_model_proj.weight"].T) * (1.0 / c.d_model ** 0.5)
        proj = self._op("per_layer_proj", -1, o.rms_norm, self._store(proj).reshape(shape),
                        w["per_layer_proj_norm.weight"], c.eps)
        rows = o.embedding(w["per_layer_token_embd.weight"], ids, scale=c.ple_dim ** 0.5).reshape(shape)
        return self._op("inp_per_layer", -1, lambda: (proj + self._store(rows)) * 0.5 ** 0.5)

    def _per_layer_branch(self, i: int, y: Any) -> Any:
        """RMSNorm(proj(gelu(gate·y) × this layer's input)): what layer i's per-layer input adds."""
        c, o, w = self.cfg, self.ops, self.ckpt
        b = f"blk.{i}."
        g = self._op("pe_gate", i, o.matmul, y, w[b + "inp_gate.weight"].T)
        h = self._op("pe_geglu", i, o.geglu, g, self.ple[:, i, :], approximate="tanh")
        p = self._op("pe_proj", i, o.matmul, h, w[b + "proj.weight"].T)
        return self._op("per_layer_embd_out", i, o.rms_norm, p, w[b + "post_norm.weight"], c.eps)

    def _per_layer_embedding(self, i: int, y: Any) -> Any:
        """Gemma 4: y + the per-layer branch of y."""
        p = self._per_layer_branch(i, y)
        return self._op("pe_out", i, lambda: y + p)

    def _output_scale(self, i: int, y: Any) -> Any:
        """Gemma 4: the block's whole output times its ``layer_output_scale``."""
        return self._op("out_scaled", i, lambda: y * self.ckpt[f"blk.{i}.layer_output_scale.weight"][0])

    # ---- Gemma 3n: AltUp streams [T, streams, d_model], LAuReL, sparse gates ----

    def _norms(self, x: Any) -> Any:
        """Per token, the Euclidean norm (in float32: an fp16 sum of squares overflows early)."""
        x32 = x.astype(self.xp.float32)
        return self.xp.sqrt((x32 * x32).sum(axis=-1, keepdims=True))

    def _altup_stack(self, x: Any) -> Any:
        """Stream 0 is x; stream k its projection by altup_proj[k-1], rescaled to x's norm per token."""
        o, w, xp = self.ops, self.ckpt, self.xp
        target, parts = self._norms(x), [x]
        for k in range(self.cfg.traits["altup"] - 1):
            self.where = ("altup_stack", -1)
            y = o.matmul(x, w["altup_proj.weight"][k].T)
            parts.append(self._store(y * (target / self._norms(y))))
        return self._keep("inp_stacked", -1, xp.stack(parts, axis=1))

    def _altup_merge(self, s: Any) -> Any:
        """The mean of stream 0 and the other streams projected back (altup_unembd_proj) at stream 0's norm."""
        o, w = self.ops, self.ckpt
        target, acc = self._norms(s[:, 0]), s[:, 0]
        for k in range(1, s.shape[1]):
            self.where = ("unembd_merged", -1)
            u = o.matmul(s[:, k], w["altup_unembd_proj.weight"][k - 1].T)
            acc = self._store(acc + u * (target / self._norms(u)))
        return self._op("unembd_merged", -1, lambda: acc * (1.0 / s.shape[1]))

    def _router(self, i: int, x: Any) -> Any:
        """[T, streams]: tanh(altup_router · RMSNorm(x) / d_model)."""
        c, o, w, b = self.cfg, self.ops, self.ckpt, f"blk.{i}."
        r = o.rms_norm(x, w[b + "altup_router_norm.weight"], c.eps) * (1.0 / c.d_model)
        return self.xp.tanh(o.matmul(self._store(r), w[b + "altup_router.weight"].T))

    def _altup_predict(self, i: int, s: Any) -> Any:
        t, n = s.shape[0], s.shape[1]
        self.where = ("predictions", i)
        coef = self.ops.matmul(self._router(i, s[:, 0]), self.ckpt[f"blk.{i}.altup_predict_coef.weight"].T)
        return self._op("predictions", i, lambda: s + self.xp.matmul(coef.reshape(t, n, n), s))

    def _altup_correct(self, i: int, pred: Any, y: Any) -> Any:
        self.where = ("corrected", i)
        coef = self.ops.matmul(self._router(i, y), self.ckpt[f"blk.{i}.altup_correct_coef.weight"].T) + 1.0
        innov = self._op("innovation", i, lambda: y - pred[:, 0])
        return self._op("corrected", i, lambda: pred + coef[:, :, None] * innov[:, None, :])

    def _laurel(self, i: int, h: Any) -> Any:
        """LAuReL: h + RMSNorm(laurel_r · laurel_l · h)."""
        c, o, w, b = self.cfg, self.ops, self.ckpt, f"blk.{i}."
        self.where = ("laurel_out", i)
        low = o.matmul(self._store(o.matmul(h, w[b + "laurel_l.weight"].T)), w[b + "laurel_r.weight"].T)
        low = o.rms_norm(self._store(low), w[b + "laurel_post_norm.weight"], c.eps)
        return self._op("laurel_out", i, lambda: h + low)

    def _gaussian_topk(self, g: Any) -> Any:
        """relu(g - mean - 1.6448533·std) per row, std with n - 1 (the 95 % quantile of a normal)."""
        g32 = g.astype(self.xp.float32)
        mean = g32.mean(axis=-1, keepdims=True)
        std = self.xp.sqrt(((g32 - mean) ** 2).sum(axis=-1, keepdims=True) / (g.shape[-1] - 1))
        return self.xp.maximum(g32 - (mean + std * self.xp.float32(1.6448533535003662)), 0)

    def _altup_layer(self, i: int, s: Any, pos: Any) -> Any:
        c, o, w = self.cfg, self.ops, self.ckpt
        b = f"blk.{i}."
        pred = self._altup_predict(i, s)
        act = pred[:, 0]
        h = self._op("attn_norm", i, o.rms_norm, act, w[b + "attn_norm.weight"], c.eps)
        lo = self._laurel(i, h)
        a = self._op("attn_out", i, o.matmul, self._attend(i, h, pos), w[b + "attn_output.weight"].T)
        a = self._op("attn_post_norm", i, o.rms_norm, a, w[b + "post_attention_norm.weight"], c.eps)
        gated = self._op("attn_gated", i, lambda: a + act)
        mid = self._op("attn_laurel", i, lambda: (gated + lo) * 0.5 ** 0.5)
        down = self._op("ffn_post_norm", i, o.rms_norm, self._mlp(i, mid), w[b + "post_ffw_norm.weight"], c.eps)
        y = self._op("attn_ffw_laurel_gated", i, lambda: down + mid)
        corr = self._altup_correct(i, pred, y)
        first = self._op("altup_first", i, lambda: corr[:, 0] * w[b + "altup_correct_scale.weight"])
        e = self._per_layer_branch(i, first)
        out = self.xp.concatenate([corr[:, :1], corr[:, 1:] + e[:, None, :]], axis=1)
        return self._op("l_out", i, lambda: out)

    def _layer(self, i: int, x: Any, pos: Any) -> Any:
        c, o, w = self.cfg, self.ops, self.ckpt
        b = f"blk.{i}."
        if c.traits.get("altup"):
            return self._altup_layer(i, x, pos)
        h = self._op("attn_norm", i, o.rms_norm, x, w[b + "attn_norm.weight"], c.eps)
        a = self._op("attn_out", i, o.matmul, self._attend(i, h, pos), w[b + "attn_output.weight"].T)
        if c.traits.get("sandwich"):
            a = self._op("attn_post_norm", i, o.rms_norm, a, w[b + "post_attention_norm.weight"], c.eps)
        mid = self._op("sa_out" if c.traits.get("sandwich") else "ffn_inp", i, lambda: a + x)
        down = self._mlp(i, mid)
        if c.traits.get("sandwich"):
            down = self._op("ffn_post_norm", i, o.rms_norm, down, w[b + "post_ffw_norm.weight"], c.eps)
        scaled = c.traits.get("layer_scale") and f"{b}layer_output_scale.weight" in self.ckpt.raw
        if self.ple is None and not scaled:
            return self._op("l_out", i, lambda: down + mid)
        out = self._op("pe_in" if self.ple is not None else "res_out", i, lambda: down + mid)
        if self.ple is not None:
            out = self._per_layer_embedding(i, out)
        if scaled:
            out = self._output_scale(i, out)
        return self._op("l_out", i, lambda: out)  # the block's output under its graph name (an identity)

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
        has_ple = c.traits.get("per_layer_embd") and "per_layer_token_embd.weight" in self.ckpt.raw
        self.ple = self._per_layer_inputs(x, ids) if has_ple else None
        if c.traits.get("altup"):
            x = self._altup_stack(x)
        for i in range(c.n_layers):
            x = self._layer(i, x, pos)
        if c.traits.get("altup"):
            x = self._altup_merge(x)
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
