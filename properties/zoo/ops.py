"""The ops bug zoo: mutants of gpu_impl.ops, each a bug from public engine-porting reports.

A mutant is the ops module with some functions replaced by a buggy version built from the
module's own public functions (or, where the bug is inside one, a short rewrite). The runner
hunts each with every op property (``properties.ops.suite``) whose body calls a replaced
function, every dtype, in suite order.
"""
from __future__ import annotations

import importlib
import types
from typing import Any, Callable

import ml_dtypes
import numpy as np

from properties.backends import cupy_or_none
from properties.ops.suite import PROPERTIES
from properties.zoo.runner import Domain, Mutant, Property, replaced


def _xp(x: Any):
    cp = cupy_or_none()
    return cp.get_array_module(x) if cp is not None else np


def _f32(x: Any) -> Any:
    xp = _xp(x)
    if x.dtype.name == "bfloat16" or (x.dtype == xp.uint16 and xp is not np):
        bits = x.view(np.uint16) if x.dtype.name == "bfloat16" else x
        return (bits.astype(xp.uint32) << 16).view(xp.float32)
    return x.astype(xp.float32)


Patch = Callable[[types.ModuleType], dict[str, Callable]]
"""The ops module -> {function name: buggy replacement}."""


def mutate(module: types.ModuleType, name: str, patch: Patch) -> types.ModuleType:
    mod = types.ModuleType(f"{module.__name__}[{name}]")
    mod.__dict__.update({k: getattr(module, k) for k in dir(module) if not k.startswith("_")})
    mod.__dict__.update(patch(module))
    return mod


def _mutant(name: str, bug: str, patch: Patch) -> Mutant:
    """The functions it replaces are read off the patch itself (applied to gpu_impl.ops)."""
    replaces = frozenset(patch(importlib.import_module("gpu_impl.ops")))
    return Mutant(name, bug, replaces, replaced(lambda base: mutate(base, name, patch)))


def properties() -> list[Property]:
    """Every op property at every dtype, in the order of ``properties.ops.suite.PROPERTIES``."""
    return [p.at(d, f"{p.name}/{d}") for p in PROPERTIES for d in p.points()]


def _rope_restart(o):
    def attention_step(cache, q, k, v, positions, *, rope=None, **attn):
        local = positions - positions[0]  # the bug: every call starts RoPE at position 0
        if rope is not None:
            q, k = o.rope(q, local, **rope), o.rope(k, local, **rope)
        cache.append(k, v, positions)
        return o.attention_decode(cache, q, positions, **attn)
    return {"attention_step": attention_step}


def _refeed(o):
    def attention_step(cache, q, k, v, positions, *, rope=None, **attn):
        if not hasattr(cache, "zoo_fed"):  # the driver's token history lives with its cache
            cache.zoo_fed = []
        seq = cache.zoo_fed
        seq.append((q, k, v))
        xp = _xp(q)
        whole = [xp.concatenate([s[i] for s in seq]) for i in range(3)]
        # the bug: the whole sequence goes through the step again, at positions n_past + i
        pos = xp.arange(len(cache), len(cache) + whole[0].shape[0])
        out = o.attention_step(cache, *whole, pos, rope=rope, **attn)
        return out[-q.shape[0]:]
    return {"attention_step": attention_step}


def _kv_dmodel(o):
    def project_qkv(x, w_qkv, n_head, n_kv_head, head_dim):
        y = o.matmul(x, w_qkv.T)
        t, d_model, q_end = x.shape[0], x.shape[1], n_head * head_dim
        # the bug: K and V are taken as d_model wide, as if n_kv_head·head_dim == d_model
        k, v = y[:, q_end:q_end + d_model], y[:, q_end + d_model:q_end + 2 * d_model]
        return (y[:, :q_end].reshape(t, n_head, head_dim), k.reshape(t, -1, head_dim), v.reshape(t, -1, head_dim))
    return {"project_qkv": project_qkv}


def _rms(mean_square: bool, with_eps: bool, unit_offset_honoured: bool = True):
    def rms_norm(x, weight=None, eps=1e-6, unit_offset=False):
        xp = _xp(x)
        a = _f32(x)
        stat = xp.mean(a * a if mean_square else a, axis=-1, keepdims=True)
        with np.errstate(all="ignore"):
            y = a / xp.sqrt(stat + (xp.float32(eps) if with_eps else 0))
        w = xp.ones(a.shape[-1], xp.float32) if weight is None else _f32(weight)
        return y * (w + 1 if unit_offset and unit_offset_honoured else w)
    return rms_norm


def _softmax_no_max(o):
    def softmax(x, axis=-1, scale=1.0, mask=None):
        xp = _xp(x)
        # the bug: exp(z) straight away, in the storage precision when that is fp16
        z = x if x.dtype == xp.float16 else _f32(x)
        z = z * z.dtype.type(scale)
        if mask is not None:
            z = z + _f32(mask).astype(z.dtype)
        with np.errstate(all="ignore"):
            e = xp.exp(z)
            return (e / e.sum(axis=axis, keepdims=True)).astype(xp.float32)
    return {"softmax": softmax}


def _layer_norm_one_pass(x, weight=None, bias=None, eps=1e-5):
    xp = _xp(x)
    a = _f32(x)
    mean = a.mean(axis=-1, keepdims=True)
    var = (a * a).mean(axis=-1, keepdims=True) - mean * mean  # the bug: E[x²] - E[x]² cancels
    with np.errstate(all="ignore"):
        y = (a - mean) / xp.sqrt(xp.maximum(var, 0) + xp.float32(eps))
    if weight is not None:
        y = y * _f32(weight)
    return y + _f32(bias) if bias is not None else y


def _matmul_fp16_accumulate(a, b):
    xp = _xp(a)
    a16, b16 = _f32(a).astype(xp.float16), _f32(b).astype(xp.float16)
    acc = xp.zeros((a.shape[0], b.shape[1]), xp.float16)
    for i in range(a.shape[1]):  # the bug: the running sum is kept in fp16
        acc = acc + a16[:, i:i + 1] * b16[i:i + 1, :]
    return acc.astype(xp.float32)


def _attention_masked_nan_leak(o):
    def attention(q, k, v, q_pos, k_pos, *, scale=None, causal=True, window=0, softcap=0.0):
        xp = _xp(q)
        q32, k32, v32 = _f32(q), _f32(k), _f32(v)
        g = q.shape[1] // k.shape[1]
        kk, vv = xp.repeat(k32, g, axis=1), xp.repeat(v32, g, axis=1)
        s = xp.einsum("thd,jhd->htj", q32, kk) * xp.float32(scale or q.shape[2] ** -0.5)
        if softcap:
            s = xp.float32(softcap) * xp.tanh(s / xp.float32(softcap))
        gap = xp.asarray(q_pos)[:, None] - xp.asarray(k_pos)[None, :]
        vis = (gap >= 0) & ((gap < window) if window else True)
        # the bug: the mask is added (-inf + NaN = NaN) and masked values are weighted by 0 (0·NaN = NaN)
        p = o.softmax(s, mask=xp.where(vis, 0.0, -xp.inf).astype(xp.float32)[None])
        return xp.einsum("htj,jhd->thd", p, vv)
    return {"attention": attention}


def _gqa_interleaved(o):
    def attention(q, k, v, *args, **kw):
        g = q.shape[1] // k.shape[1]
        xp = _xp(q)
        # the bug: query head h reads K/V head h % n_kv_head instead of h // group
        return o.attention(q, xp.concatenate([k] * g, axis=1), xp.concatenate([v] * g, axis=1), *args, **kw)
    return {"attention": attention}


def _cache_order(o):
    def attention_decode(cache, q, q_pos, **attn):
        xp = _xp(q)
        pos = cache.positions
        # the bug: cells are assumed to be in position order, their stored positions ignored
        return o.attention(q, cache.k, cache.v, q_pos, xp.arange(len(cache)) + pos.min(), **attn)
    return {"attention_decode": attention_decode}


def _kw(fn_name: str, **changes: Callable[[Any], Any]):
    """Replace keyword arguments of one function: changes[name](value) -> new value."""
    def patch(o):
        original = getattr(o, fn_name)

        def wrapped(*args, **kw):
            for name, f in changes.items():
                kw[name] = f(kw.get(name))
            return original(*args, **kw)
        return {fn_name: wrapped}
    return patch


def _bf16(v: float) -> float:
    return float(np.float32(v).astype(ml_dtypes.bfloat16))


MUTANTS: tuple[Mutant, ...] = (
    _mutant("rope_restarts_each_step", "RoPE positions restart at 0 on every decode step",
            _rope_restart),
    _mutant("no_causal_mask", "attention without the causal mask",
            _kw("attention", causal=lambda c: False)),
    _mutant("kv_projected_to_d_model", "K/V split as d_model wide instead of n_kv_heads·head_dim",
            _kv_dmodel),
    _mutant("whole_sequence_refed", "the whole sequence re-fed each step (at n_past + i) into the cache",
            _refeed),
    _mutant("gelu_exact_for_tanh", "exact erf GELU where the tanh approximation is the contract",
            _kw("gelu", approximate=lambda a: "none")),
    _mutant("softcap_15_not_30", "final softcap halved (15 where the model says 30)",
            _kw("softcap", cap=lambda c: c / 2)),
    _mutant("rms_norm_mean_not_mean_square", "rms_norm divides by sqrt(mean(x) + eps)",
            lambda o: {"rms_norm": _rms(False, True)}),
    _mutant("rms_norm_drops_eps", "rms_norm without eps",
            lambda o: {"rms_norm": _rms(True, False)}),
    _mutant("embedding_scale_missing", "embedding rows not multiplied by √d",
            _kw("embedding", scale=lambda s: 1.0)),
    _mutant("rope_layouts_swapped", "NeoX and normal RoPE layouts swapped",
            _kw("rope", mode=lambda m: "normal" if m == "neox" else "neox")),
    _mutant("softmax_without_max", "softmax without the max subtraction (fp16 overflow)",
            _softmax_no_max),
    _mutant("logits_sliced_by_hidden", "logits sliced with the hidden size instead of the vocab size",
            lambda o: {"output_logits": lambda hidden, w_out, n_vocab, softcap=0.0: o.output_logits(
                 hidden, w_out, w_out.shape[0], softcap)[:, :hidden.shape[1]]}),
    # more from the same reports
    _mutant("gqa_heads_interleaved", "query head h reads K/V head h % n_kv_head",
            _gqa_interleaved),
    _mutant("cache_positions_ignored", "cache cells assumed in position order",
            _cache_order),
    _mutant("masked_nan_leaks", "additive -inf mask and 0·v for masked entries (NaN in the cache leaks)",
            _attention_masked_nan_leak),
    _mutant("window_off_by_one", "sliding window keeps one key too many",
            _kw("attention", window=lambda w: w + 1 if w else 0)),
    _mutant("layer_norm_one_pass_variance", "variance as E[x²] - E[x]²",
            lambda o: {"layer_norm": _layer_norm_one_pass}),
    _mutant("rms_norm_ignores_unit_offset", "Gemma's (1 + w) applied as w",
            lambda o: {"rms_norm": _rms(True, True, unit_offset_honoured=False)}),
    _mutant("argmax_last_max", "argmax returns the last maximal index",
            lambda o: {"argmax": lambda x: x.shape[-1] - 1 - o.argmax(x[..., ::-1])}),
    _mutant("matmul_fp16_accumulator", "fp16 inputs accumulated in fp16",
            lambda o: {"matmul": _matmul_fp16_accumulate}),
    _mutant("embedding_scale_rounded_bf16", "√d rounded to bf16 before scaling (55.4256 → 55.5)",
            _kw("embedding", scale=lambda s: _bf16(s))),
    _mutant("softmax_mask_as_large_negative", "mask -inf replaced by -1e4 (a 'safe' finite mask value)",
            lambda o: {"softmax": lambda x, axis=-1, scale=1.0, mask=None: o.softmax(
                 x, axis, scale, None if mask is None else _xp(mask).maximum(_f32(mask), -1e4))}),
    _mutant("rope_positions_through_fp16", "positions passed through fp16 (exact only below 2048)",
            lambda o: {"rope": lambda x, positions, **kw: o.rope(
                 x, _xp(positions).asarray(positions).astype(np.float16).astype(np.int64), **kw)}),
)

DOMAIN = Domain("ops", "gpu_impl.ops", properties, MUTANTS)
