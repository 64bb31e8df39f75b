"""The reducing ops (softmax, log_softmax, rms_norm, layer_norm, matmul) with gpu_impl.ops' API,
written as engines write them and parametrised by their arithmetic.

Input checks and refusals are gpu_impl.ops' own (the API contract); the arithmetic is not.
Norms are written as every production kernel writes them: a float32 sum of squares and
``x · (1/sqrt(mean + eps))``, with no rescaling against overflow. That is correct on every row
whose squares fit in float32, and nothing more: the judge must say which domain it demands.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from gpu_impl.ops._xp import f32, ndim, quiet
from gpu_impl.ops.norms import _setup
from gpu_impl.ops.softmax import _logits
from properties.zoo.conforming._arith import F32, Arith, _pad, threads_for, tree

Dot = Callable[[np.ndarray, np.ndarray], np.ndarray]


# --- matmul: how a GEMM accumulates each output over K ------------------------------------------

def _fma(a: np.ndarray, b: np.ndarray, acc: np.ndarray) -> np.ndarray:
    """fl32(a·b + acc) with one rounding: the float32 product is exact in double, and the double
    sum rounds to float32 (a double rounding differs from a true FMA only on exact ties)."""
    return (a.astype(np.float64) * b.astype(np.float64) + acc.astype(np.float64)).astype(F32)


def dot_fma(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """One thread per output, an FMA per k (a CUDA GEMM's inner loop)."""
    acc = np.zeros((a.shape[0], b.shape[1]), F32)
    for k in range(a.shape[1]):
        acc = _fma(a[:, k:k + 1], b[k:k + 1, :], acc)
    return acc


def dot_simd(a: np.ndarray, b: np.ndarray, lanes: int = 32) -> np.ndarray:
    """ggml-CPU's vector dot: 32 FMA accumulators over k ≡ lane (mod 32), a tree over the lanes,
    then the leftover k (K mod 32) added in a scalar loop."""
    K = a.shape[1]
    body = K - K % lanes
    acc = np.zeros((a.shape[0], b.shape[1], lanes), F32)
    for k0 in range(0, body, lanes):
        acc = _fma(a[:, k0:k0 + lanes][:, None, :], b[k0:k0 + lanes, :].T[None, :, :], acc)
    out = tree(acc) if body else np.zeros((a.shape[0], b.shape[1]), F32)
    for k in range(body, K):
        out = out + a[:, k:k + 1] * b[k:k + 1, :]
    return out


def dot_split_k(a: np.ndarray, b: np.ndarray, splits: int = 4) -> np.ndarray:
    """cuBLAS-style split-K for long K: FMA chains over ``splits`` contiguous slices, then a tree."""
    K = a.shape[1]
    if K < 256:
        return dot_fma(a, b)
    edges = np.linspace(0, K, splits + 1).astype(int)
    parts = np.stack([dot_fma(a[:, lo:hi], b[lo:hi]) for lo, hi in zip(edges[:-1], edges[1:])], axis=-1)
    return tree(parts)


def dot_kahan(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    s = np.zeros((a.shape[0], b.shape[1]), F32)
    c = np.zeros_like(s)
    for k in range(a.shape[1]):
        y = a[:, k:k + 1] * b[k:k + 1, :] - c
        t = s + y
        c = (t - s) - y
        s = t
    return s


def dot_f64(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return (a.astype(np.float64) @ b.astype(np.float64)).astype(F32)


def make_matmul(dot: Dot) -> Callable[[Any, Any], np.ndarray]:
    def matmul(a: Any, b: Any) -> np.ndarray:
        a32, b32 = f32(np, a, "a"), f32(np, b, "b")
        ndim(a32, 2, "a")
        ndim(b32, 2, "b")
        if a32.shape[1] != b32.shape[0]:
            raise ValueError(f"matmul: a {a32.shape} and b {b32.shape} have different inner dimensions")
        with quiet():
            return dot(a32, b32)
    return matmul


# --- softmax / log_softmax ------------------------------------------------------------------------

def _shifted(ar: Arith, x: Any, axis: int, scale: float, mask: Any):
    """(d = z - max, e = exp d, s = the engine's normaliser, undefined rows, axis) on the last axis."""
    _, z, axis = _logits(x, axis, scale, mask)
    z = np.moveaxis(z, axis, -1)
    top = z.max(axis=-1)
    undefined = ~np.isfinite(top)
    with quiet():
        d = z - np.where(undefined, F32(0), top)[..., None]
        e = ar.exp(d)
        s = ar.normaliser(z, e)
    return d, e, s[..., None], undefined[..., None], axis


def make_softmax(ar: Arith) -> Callable[..., np.ndarray]:
    def softmax(x: Any, axis: int = -1, scale: float = 1.0, mask: Any = None) -> np.ndarray:
        d, e, s, undefined, axis = _shifted(ar, x, axis, scale, mask)
        with quiet():
            p = ar.normalise(e, s)
        return np.moveaxis(np.where(undefined, F32(np.nan), p), -1, axis)
    return softmax


def make_log_softmax(ar: Arith) -> Callable[..., np.ndarray]:
    def log_softmax(x: Any, axis: int = -1, scale: float = 1.0, mask: Any = None) -> np.ndarray:
        d, e, s, undefined, axis = _shifted(ar, x, axis, scale, mask)
        with quiet():
            out = d - ar.log(s)
        return np.moveaxis(np.where(undefined, F32(np.nan), out), -1, axis)
    return log_softmax


# --- norms ----------------------------------------------------------------------------------------

def inv_sqrt_div(v: np.ndarray) -> np.ndarray:
    """1.0f / sqrtf(v): two roundings (CPU loops)."""
    return F32(1) / np.sqrt(v)


def inv_sqrt_rsqrt(v: np.ndarray) -> np.ndarray:
    """rsqrtf(v), modelled as one rounding of the exact value (CUDA's is within 2 ulp)."""
    return (1.0 / np.sqrt(v.astype(np.float64))).astype(F32)


def _affine(y: np.ndarray, aff: dict, unit_offset: bool = False) -> np.ndarray:
    w = aff.get("weight")
    if w is not None:
        y = y * (w + F32(1) if unit_offset else w)
    elif unit_offset:
        y = y * F32(2)
    b = aff.get("bias")
    return y + b if b is not None else y


def make_rms_norm(ar: Arith, inv_sqrt: Callable = inv_sqrt_div) -> Callable[..., np.ndarray]:
    def rms_norm(x: Any, weight: Any = None, eps: float = 1e-6, unit_offset: bool = False) -> np.ndarray:
        _, a, e, aff = _setup(x, eps, {"weight": weight})
        with quiet():
            mean = ar.divide(ar.sum(a * a), F32(a.shape[-1]))
            y = a * inv_sqrt(mean + F32(e))[..., None]
            return _affine(y, aff, unit_offset)
    return rms_norm


def make_layer_norm(ar: Arith, inv_sqrt: Callable = inv_sqrt_div) -> Callable[..., np.ndarray]:
    """Two passes: the mean, then the mean square of x - mean (no E[x²] - E[x]² cancellation)."""
    def layer_norm(x: Any, weight: Any = None, bias: Any = None, eps: float = 1e-5) -> np.ndarray:
        _, a, e, aff = _setup(x, eps, {"weight": weight, "bias": bias})
        n = F32(a.shape[-1])
        with quiet():
            c = a - ar.divide(ar.sum(a), n)[..., None]
            y = c * inv_sqrt(ar.divide(ar.sum(c * c), n) + F32(e))[..., None]
            return _affine(y, aff)
    return layer_norm


def welford_layer_norm(x: Any, weight: Any = None, bias: Any = None, eps: float = 1e-5,
                       inv_sqrt: Callable = inv_sqrt_rsqrt) -> np.ndarray:
    """PyTorch-CUDA style: each thread runs Welford over its strided columns, the block merges
    the (count, mean, M2) triples with Chan's formula in a tree; rsqrt, multiply."""
    _, a, e, aff = _setup(x, eps, {"weight": weight, "bias": bias})
    lead, n = a.shape[:-1], a.shape[-1]
    rows = a.reshape(-1, n)
    t = threads_for(n)
    per = -(-n // t)
    cols = _pad(rows, per * t).reshape(rows.shape[0], per, t)
    valid = (np.arange(per * t) < n).reshape(per, t)
    cnt = np.zeros((rows.shape[0], t), F32)
    mean = np.zeros_like(cnt)
    m2 = np.zeros_like(cnt)
    with quiet():
        for j in range(per):
            live = valid[j][None, :]
            cnt_new = np.where(live, cnt + F32(1), cnt)
            delta = cols[:, j, :] - mean
            mean = np.where(live, mean + delta / np.where(live, cnt_new, F32(1)), mean)
            m2 = np.where(live, m2 + delta * (cols[:, j, :] - mean), m2)
            cnt = cnt_new
        while cnt.shape[-1] > 1:  # Chan et al.'s pairwise merge
            h = cnt.shape[-1] // 2
            na, nb, ma, mb = cnt[:, :h], cnt[:, h:], mean[:, :h], mean[:, h:]
            tot = na + nb
            safe = np.where(tot > 0, tot, F32(1))
            delta = mb - ma
            mean = ma + delta * (nb / safe)
            m2 = m2[:, :h] + m2[:, h:] + delta * delta * (na * nb / safe)
            cnt = tot
        var = m2[:, 0] / F32(n)
        c = rows - mean[:, :1]
        y = c * inv_sqrt(var + F32(e))[:, None]
        return _affine(y.reshape(lead + (n,)), aff)


def op_functions(ar: Arith, dot: Dot, inv_sqrt: Callable = inv_sqrt_div) -> dict[str, Callable]:
    return {"softmax": make_softmax(ar), "log_softmax": make_log_softmax(ar),
            "rms_norm": make_rms_norm(ar, inv_sqrt), "layer_norm": make_layer_norm(ar, inv_sqrt),
            "matmul": make_matmul(dot)}

