"""Error models for the ops, in units of u = 2^-24 (float32 compute; fp16/bf16 inputs widen
exactly). Each returns ``(scale, bound)`` shaped like the oracle's output: the implementation
may differ from the exact result by ``bound · u · scale`` (plus the FTZ floor).

Every reduction of n terms is the contract's model (``numerics.Contract``): ``_depth(n)`` is
the γ index of a sum in any order the active contract accepts (default: any order, so
sequential's n - 1; strict: a tree's ⌈log2 n⌉), ``_dot(k)`` that of a k-term dot product.
Elementary functions are allowed the contract's ``numerics.fn_u(f)`` u (strict: twice CUDA's
documented single-precision maximum ulp error; default: the wider of that and Metal's precise
functions); exp the contract's ``numerics.exp_u`` (fast-math intrinsics included under the
default contract), log the contract's ``numerics.log_error_u``.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from oracle.ops.rope import rope_angles, yarn_corr_dims
from properties import numerics
from properties.ops.strategies import OpCase


def _depth(n: Any) -> Any:
    """γ index of an n-term sum under the active contract (elementwise over an array of n)."""
    c = numerics.contract()
    return np.vectorize(c.depth, otypes=[float])(n) if np.ndim(n) else c.depth(int(n))


def _dot(k: int) -> float:
    return numerics.contract().dot_depth(int(k))


def _f64(a: Any) -> np.ndarray:
    return np.asarray(a).astype(np.float64)


def _logits(case: OpCase) -> tuple[np.ndarray, int]:
    """(z = scale·x + mask with the reduction axis last, a = how many roundings z carries)."""
    p = case.params
    z = _f64(case.arrays["x"]) * p.get("scale", 1.0)
    a = int(p.get("scale", 1.0) != 1.0)
    if case.arrays.get("mask") is not None:
        z, a = z + _f64(case.arrays["mask"]), a + 1
    return np.moveaxis(z, p.get("axis", -1), -1), a


def _softmax_terms(case: OpCase):
    z, a = _logits(case)
    fin = np.isfinite(z)
    zf = np.where(fin, z, 0.0)
    m = np.where(fin, z, -np.inf).max(axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    d = np.where(fin, z - m, 0.0)
    e = np.where(fin, np.exp(d), 0.0)
    total = e.sum(axis=-1, keepdims=True)
    p = e / np.where(total > 0, total, 1.0)
    E = 2 * np.abs(d) + a * (np.abs(zf) + np.abs(m)) + numerics.exp_u(d)  # exp of a rounded argument
    Ebar = (p * E).sum(axis=-1, keepdims=True)
    n = fin.sum(axis=-1, keepdims=True)
    return p, d, E, Ebar, n, np.log(np.where(total > 0, total, 1.0))


def softmax_model(case: OpCase, exact: np.ndarray):
    """p_i: relative (2|z_i - m| + rounded-argument terms + exp) + the same averaged over the
    row + the normaliser sum's depth + the contract's quotient for e_i / S or e_i·(1 / S)
    (``numerics.quotient_u``: 6 by default, Metal's fast-math division; 2 strict)."""
    p, d, E, Ebar, n, _ = _softmax_terms(case)
    ax = case.params.get("axis", -1)
    return np.moveaxis(p, -1, ax), np.moveaxis(E + Ebar + _depth(n) + numerics.quotient_u(), -1, ax)


def log_softmax_model(case: OpCase, exact: np.ndarray):
    """Absolute error 2|z_i - m| + the normaliser's relative error (as softmax) + log's error at S
    (``numerics.log_error_u``: 2|ln S| strict, 8|ln S| + 8 near S = 1 by default)
    + the final subtraction |y_i| (covers log(softmax) too, where p does not underflow); stated
    relative to the magnitude those terms come from, 1 + |z_i - m| + |y_i| + |ln S| + argument
    roundings, so that errors read in u of the numbers involved."""
    p, d, E, Ebar, n, log_s = _softmax_terms(case)
    ax = case.params.get("axis", -1)
    y = np.moveaxis(np.where(np.isfinite(exact), exact, 0.0), ax, -1)
    args = E - 2 * np.abs(d) - numerics.exp_u(d)  # a·(|z_i| + |m|): the roundings z carries
    absolute = (2 * np.abs(d) + args + numerics.exp_u(d) + Ebar + _depth(n) + numerics.log_error_u(log_s)
                + np.abs(y) + 3)
    scale = 1 + np.abs(d) + np.abs(y) + np.abs(log_s) + args
    return np.moveaxis(scale, -1, ax), np.moveaxis(absolute / scale, -1, ax)


def rms_norm_model(case: OpCase, exact: np.ndarray):
    """Relative to |x_i|·|w_i|/rms: (depth(n) + 3)/2 from the sum of squares under the square root,
    plus 12 for the row scaling, hypot, division and weight (and 1 + w): CUDA's rsqrtf (2 ulp, 4 u)
    or 1.0f / sqrtf (the contract's ``quotient_u`` with sqrtf's own rounding) and two products."""
    x = _f64(case.arrays["x"])
    n = x.shape[-1]
    r = np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + case.params["eps"])
    w = np.abs(_f64(case.arrays["weight"])) if "weight" in case.arrays else np.ones(n)
    if case.params.get("unit_offset"):
        w = 1.0 + w
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.abs(x) / r * w, np.full(x.shape, (_depth(n) + 3) / 2 + 12)


def layer_norm_model(case: OpCase, exact: np.ndarray):
    """Relative to |w|·(|x_i - mean| + mean|x|)/σ + |b|: the mean's n-term sum shifts every
    centred value by up to (depth(n) + 4)·u·mean|x|, the variance adds (depth(n) + 3)/2 under the root."""
    x = _f64(case.arrays["x"])
    n = x.shape[-1]
    c = x - x.mean(axis=-1, keepdims=True)
    sigma = np.sqrt((c * c).mean(axis=-1, keepdims=True) + case.params["eps"])
    w = np.abs(_f64(case.arrays["weight"])) if "weight" in case.arrays else np.ones(n)
    b = np.abs(_f64(case.arrays["bias"])) if "bias" in case.arrays else np.zeros(n)
    with np.errstate(divide="ignore", invalid="ignore"):
        scale = w * (np.abs(c) + np.abs(x).mean(axis=-1, keepdims=True)) / sigma + b
    return scale, np.full(x.shape, _depth(n) + 4 + (_depth(n) + 3) / 2 + 12)


def rope_geometry(case: OpCase) -> tuple[np.ndarray, float, np.ndarray, np.ndarray, int]:
    """(theta [T, n_dims/2], mscale, first, second index arrays, n_dims) as the oracle defines them."""
    p = case.params
    x = case.arrays["x"]
    nd = p.get("n_dims") or x.shape[-1]
    ext = p.get("ext_factor", 0.0)
    corr = (yarn_corr_dims(nd, p["n_ctx_orig"], p["freq_base"], p["beta_fast"], p["beta_slow"])
            if ext else (0.0, 0.0))
    ff = case.arrays.get("freq_factors")
    theta, mscale = rope_angles(np.asarray(case.arrays["positions"]), nd, p.get("freq_base", 10000.0),
                                p.get("freq_scale", 1.0), None if ff is None else _f64(ff), ext,
                                p.get("attn_factor", 1.0), corr)
    half = nd // 2
    first = np.arange(half) * 2 if p.get("mode", "normal") == "normal" else np.arange(half)
    second = first + 1 if p.get("mode", "normal") == "normal" else first + half
    return theta, mscale, first, second, nd


def rope_model(case: OpCase, exact: np.ndarray):
    """Rotated entries: relative to mscale·(pair norm), |theta|·(6 + table_i) for the angle (p·f
    rounded, the freq factor, freq_scale and YaRN's mix: 6) + the contract's sin/cos
    (``numerics.fn_u("sincos")``) + 8 for mscale and the rotation. The frequency table of pair i: an iterated product theta_scale^i costs 2i, and
    ggml-CUDA's p·powf(theta_scale, i) costs i for theta_scale's float32 rounding plus the
    contract's pow (``numerics.pow_u``: ``__powf`` under -use_fast_math is exp2(i·log2 theta_scale));
    the larger is allowed. Pass-through entries must be copied exactly."""
    x = _f64(case.arrays["x"])
    theta, mscale, first, second, nd = rope_geometry(case)
    norm = np.hypot(x[..., first], x[..., second]) * abs(mscale)
    i = np.arange(nd // 2)
    ln_scale = -2.0 * math.log(case.params.get("freq_base", 10000.0)) / nd  # ln theta_scale
    table = np.maximum(2 * i, i + numerics.pow_u(ln_scale, i))
    pair_bound = (np.abs(theta) * (6 + table) + numerics.fn_u("sincos") + 8)[:, None, :]
    scale, bound = np.abs(x), np.zeros(x.shape)
    for idx in (first, second):
        scale[..., idx], bound[..., idx] = norm, pair_bound
    return scale, bound


def attention_model(case: OpCase, exact: np.ndarray, dq: np.ndarray | None = None,
                    dk: np.ndarray | None = None):
    """Per output (t, h, d), relative to sum_j p_j |v_jd|: each score carries (Dk + 2)·scale·
    sum|q||k| (the dot and the scaling; plus RoPE's input errors dq, dk in u when given), softcap
    adds the contract's tanh + 2 times |s'|; exp adds 2|s_j - m| + the contract's exp; the normaliser adds the p-weighted mean of those plus
    the n-term sum, and the weighted sum of values another n terms; the final out / S (or
    out·(1 / S)) the contract's quotient (``numerics.quotient_u``) and 2 for the running
    rescale's products."""
    from oracle.ops.attention import visibility

    a = case.arrays
    q, k, v = _f64(a["q"]), _f64(a["k"]), _f64(a["v"])
    p = case.params
    g = q.shape[1] // k.shape[1]
    scale = p.get("scale") or 1.0 / math.sqrt(q.shape[2])
    kk, vv = np.repeat(k, g, axis=1), np.repeat(v, g, axis=1)
    s = scale * np.einsum("thd,jhd->htj", q, kk)
    delta = (q.shape[2] + 2) * scale * np.einsum("thd,jhd->htj", np.abs(q), np.abs(kk))
    if dq is not None:
        delta += scale * (np.einsum("thd,jhd->htj", np.abs(q), np.repeat(dk, g, axis=1))
                          + np.einsum("thd,jhd->htj", dq, np.abs(kk)))
    cap = p.get("softcap", 0.0)
    if cap:
        s = cap * np.tanh(s / cap)
        delta += (numerics.fn_u("tanh") + 2) * np.abs(s)
    vis = visibility(np.asarray(a["q_pos"]), np.asarray(a["k_pos"]), p.get("causal", True), p.get("window", 0))
    s = np.where(vis[None], s, -np.inf)
    d = np.where(vis[None], s - s.max(axis=-1, keepdims=True), 0.0)
    w = np.where(vis[None], np.exp(d), 0.0)
    prob = w / w.sum(axis=-1, keepdims=True)
    E = np.where(vis[None], delta + 2 * np.abs(d) + numerics.exp_u(d), 0.0)
    Ebar = (prob * E).sum(axis=-1)[..., None]
    den = np.einsum("htj,jhd->htd", prob, np.abs(vv))
    num = np.einsum("htj,jhd->htd", prob * E, np.abs(vv))
    n = vis.sum(axis=1)[None, :, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        bound = np.where(den > 0, num / den, 0.0) + Ebar + 2 * (_depth(n) + 1) + 2 + numerics.quotient_u()
    return den.transpose(1, 0, 2), bound.transpose(1, 0, 2)


def gate_model(case: OpCase, exact: np.ndarray):
    """x·gate(x): absolute relative to |x| + |y| (engines' 1 + tanh / 1 + erf cancel for x ≪ 0),
    the gate function's error (the contract's tanh, erf or exp: ``_gate_fn_u``) + 4 for the
    argument and the products."""
    x = _f64(case.arrays["x"])
    return np.abs(x) + np.abs(np.where(np.isfinite(exact), exact, 0.0)), np.full(x.shape, _gate_fn_u() + 4)


def _gate_fn_u() -> float:
    """The accepted error of the function inside a gate: tanh (GELU's approximation), erf (exact
    GELU) or exp (SiLU's 1 / (1 + e^-x))."""
    return max(numerics.fn_u(f) for f in ("tanh", "erf", "exp"))


def gated_product_model(case: OpCase, exact: np.ndarray):
    """act(g)·up: the activation's model times |up| plus one rounding of the product."""
    from oracle import ops

    g, up = _f64(case.arrays["gate"]), _f64(case.arrays["up"])
    act = ops.silu(g) if case.op == "swiglu" else ops.gelu(g, case.params.get("approximate", "tanh"))
    return (np.abs(g) + np.abs(act)) * np.abs(up), np.full(g.shape, _gate_fn_u() + 6)


def softcap_model(case: OpCase, exact: np.ndarray):
    """c·tanh(x/c), relative: x/c, the contract's tanh (``numerics.fn_u("tanh")``), ·c, and c
    rounded to fp32."""
    return np.abs(exact), np.full(exact.shape, numerics.fn_u("tanh") + 4)


def embedding_model(case: OpCase, exact: np.ndarray):
    """A copied row times scale: the scale rounded to fp32 and one product."""
    return np.abs(exact), np.full(exact.shape, 2.0)


def matmul_model(case: OpCase, exact: np.ndarray):
    """γ_K: the K-term dot product's depth + 2 u of (|A|·|B|)_ij (K + 2 in any order); the
    Higham-Mary gate (OpRecord.gate) holds its 99th percentile to √K·u on top."""
    a, b = np.abs(_f64(case.arrays["a"])), np.abs(_f64(case.arrays["b"]))
    return a @ b, np.full(exact.shape, _dot(a.shape[1]) + 2.0)


def output_logits_model(case: OpCase, exact: np.ndarray):
    """The product's γ_d of |h|·|W|ᵀ, and with a softcap its 8 u relative to |y| on top."""
    h, w = np.abs(_f64(case.arrays["hidden"])), np.abs(_f64(case.arrays["w_out"]))
    base = h @ w[: case.params["n_vocab"]].T
    if case.params.get("softcap", 0.0):
        return base + np.abs(exact), np.full(exact.shape, _dot(h.shape[1]) + 2 + numerics.fn_u("tanh") + 4)
    return base, np.full(exact.shape, _dot(h.shape[1]) + 2.0)


def project_qkv_model(case: OpCase, exact: tuple[np.ndarray, ...]):
    """γ_{d_model} of |x|·|W|ᵀ for each of q, k, v."""
    x, w = np.abs(_f64(case.arrays["x"])), np.abs(_f64(case.arrays["w_qkv"]))
    base = x @ w.T
    scales, start = [], 0
    for part in exact:
        width = part.shape[1] * part.shape[2]
        scales.append(base[:, start:start + width].reshape(part.shape))
        start += width
    return tuple(scales), tuple(np.full(part.shape, _dot(x.shape[1]) + 2.0) for part in exact)
