"""Metal's single-precision functions at their documented worst, from the Metal Shading Language
specification 4.1, §8.4: Table 8.2 for fast math, the Metal compiler's default mode (ggml-metal
compiles its library that way; MLX builds with -fno-fast-math and calls ``fast::exp`` by name in
its softmax, logsumexp and attention), Table 8.1 for the precise functions (``-fno-fast-math``,
``metal::precise``).

Each result is the float32 nearest the exact value moved by the documented bound and no further
(``off_by``), towards +inf where the argument's last mantissa bit is set and towards 0 elsewhere,
so that neighbouring errors do not all share one sign. Where the table gives no bound, nothing is
modelled. Presumed, not stated by the table, and not measured here (no Metal device): exp(0) =
exp2(0) = 1 and log(1) = 0 exactly, as on CUDA. Subnormal results are flushed to zero (§8.1
allows it).
"""
from __future__ import annotations

import numpy as np

from properties.numerics.units import METAL_FAST_LOG_ABS, ulp32
from properties.zoo.conforming._arith import (F32, Arith, Intrinsics, block_scan, block_sum, fast_rsqrt, off_by,
                                              tree, ulps_away)

TINY = np.finfo(F32).tiny


def _toward(x: np.ndarray) -> np.ndarray:
    """+1 where x's last mantissa bit is set, else -1: the side an error is played on."""
    return np.where((np.asarray(x, F32).view(np.uint32) & 1).astype(bool), 1.0, -1.0)


def _at_worst(x: np.ndarray, exact: np.ndarray, ulps: np.ndarray) -> np.ndarray:
    """exact moved ``ulps`` ulp (of itself) to x's side, non-finite results kept, subnormals flushed."""
    finite = np.isfinite(exact) & (exact != 0) & np.isfinite(ulps)  # e^-inf = 0 and e^+inf stay exact
    with np.errstate(invalid="ignore", over="ignore"):
        r = off_by(np.where(finite, exact, 1.0), np.where(finite, _toward(x) * ulps * ulp32(np.where(finite, exact, 1.0)), 0.0))
        r = np.where(finite, r, exact.astype(F32))
    return np.where(np.abs(r) < TINY, F32(0), r).astype(F32)


def _exponential(base_fn, x: np.ndarray, ulps) -> np.ndarray:
    """base_fn(x) (np.exp or np.exp2) within ``ulps(x)`` ulp at its worst; 1 exactly at x = 0."""
    x = np.asarray(x, F32)
    with np.errstate(over="ignore", under="ignore"):
        exact = base_fn(x.astype(np.float64))
    return np.where(x == 0, F32(1), _at_worst(x, exact, ulps(x.astype(np.float64)))).astype(F32)


def _table_8_2(x: np.ndarray) -> np.ndarray:
    """Fast math's exp / exp2 bound: 3 + floor(|2x|) ulp."""
    return 3 + np.floor(np.abs(2 * x))


def fast_exp(d: np.ndarray) -> np.ndarray:
    """fast::exp(d): within 3 + floor(|2d|) ulp (Table 8.2)."""
    return _exponential(np.exp, d, _table_8_2)


def fast_exp2(t: np.ndarray) -> np.ndarray:
    """fast::exp2(t): within 3 + floor(|2t|) ulp (Table 8.2)."""
    return _exponential(np.exp2, t, _table_8_2)


def precise_exp2(t: np.ndarray) -> np.ndarray:
    """metal::precise::exp2(t): within 4 ulp (Table 8.1)."""
    return _exponential(np.exp2, t, lambda x: np.full(x.shape, 4.0))


def fast_log(x: np.ndarray) -> np.ndarray:
    """fast::log(x): within 2^-21 absolute for x in [0.5, 2], 3 ulp elsewhere (Table 8.2)."""
    x = np.asarray(x, F32)
    with np.errstate(divide="ignore", invalid="ignore"):
        exact = np.log(x.astype(np.float64))
    finite = np.isfinite(exact)
    near = (x >= 0.5) & (x <= 2)
    off = _toward(x) * np.where(near, METAL_FAST_LOG_ABS, 3 * ulp32(np.where(finite, exact, 1.0)))
    with np.errstate(invalid="ignore"):
        r = off_by(np.where(finite, exact, 0.0), off)
    return np.where(~finite | (x == 1), exact.astype(F32), r).astype(F32)


def fast_divide(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x / y under fast math: within 2.5 ulp (Table 8.2), exact by a power-of-two y."""
    x, y = np.asarray(x, F32), np.asarray(y, F32)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        q = x.astype(np.float64) / y.astype(np.float64)
    return ulps_away(q, np.broadcast_to(np.frexp(y)[0] != 0.5, q.shape), limit=2.5)


def fast_reciprocal(y: np.ndarray) -> np.ndarray:
    """1.0 / y under fast math: within 1 ulp (Table 8.2), exact at a power of two."""
    y = np.asarray(y, F32)
    with np.errstate(divide="ignore"):
        q = 1.0 / y.astype(np.float64)
    return ulps_away(q, np.frexp(y)[0] != 0.5, limit=1.0)


def precise_tanh(x: np.ndarray) -> np.ndarray:
    """metal::precise::tanh(x): within 5 ulp (Table 8.1; ggml-metal's GELU and softcap call it)."""
    x = np.asarray(x, F32)
    a = np.abs(x)  # computed on |x|, the sign restored: tanh stays odd
    exact = np.tanh(a.astype(np.float64))
    r = np.clip(off_by(exact, _toward(a) * 5 * ulp32(np.where(exact > 0, exact, 1.0))), F32(0), F32(1))
    return np.copysign(np.where(a == 0, F32(0), r), x).astype(F32)


def precise_sincos(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """metal::precise::sin / cos(θ): each within 4 ulp (Table 8.1)."""
    th = np.asarray(theta, F32)
    s, c = np.sin(th.astype(np.float64)), np.cos(th.astype(np.float64))
    return _at_worst(th, s, np.full(th.shape, 4.0)), _at_worst(-th, c, np.full(th.shape, 4.0))


def fast_inv_sqrt(v: np.ndarray) -> np.ndarray:
    """1.0f / sqrt(v) as ggml-metal's norms write it under fast math: sqrt is v·rsqrt(v) (Table 8.2,
    rsqrt within 2 ulp), then the 1-ulp reciprocal, each at its worst."""
    v = np.asarray(v, F32)
    with np.errstate(invalid="ignore", over="ignore"):
        return fast_reciprocal((v * fast_rsqrt(v)).astype(F32))


def mlx_looped_sum(z: np.ndarray, threads: int = 1024, reads: int = 4) -> np.ndarray:
    """Σ exp(z - max) over the last axis as MLX's looped softmax kernel computes it (rows over 4,096
    logits): each thread keeps a running max and sum over its chunks of ``reads`` consecutive
    logits, rescaling by fast::exp(old - new) when its max rises; the threads' sums are then
    rescaled to the SIMD group's max and summed (32 lanes), and again across the 32 groups. Per-
    thread streams and two merge levels are not the contract's online order (256-token tiles in
    token order): ``test_online_rescales`` measures this one against θ."""
    a = np.asarray(z, F32)
    lead, v = a.shape[:-1], a.shape[-1]
    rows = a.reshape(-1, v)
    b = rows.shape[0]
    xs = np.concatenate([rows, np.full((b, -v % (threads * reads)), -np.inf, F32)], axis=1)
    xs = xs.reshape(b, -1, threads, reads)
    m, s = np.full((b, threads), -np.inf, F32), np.zeros((b, threads), F32)
    with np.errstate(invalid="ignore", over="ignore"):
        for k in range(xs.shape[1]):
            blk = xs[:, k]
            prev, m = m, np.maximum(m, blk.max(axis=2))
            base = np.where(m > -np.inf, m, F32(0))
            s = (s * np.where(prev > -np.inf, fast_exp((prev - base).astype(F32)), F32(0))).astype(F32)
            for r in range(reads):
                term = np.where(blk[:, :, r] > -np.inf, fast_exp((blk[:, :, r] - base).astype(F32)), F32(0))
                s = (s + term).astype(F32)
        for width in (32, threads // 32):  # SIMD groups, then the threadgroup
            mg, sg = m.reshape(b, -1, width), s.reshape(b, -1, width)
            m = mg.max(axis=2)
            scale = np.where(mg > -np.inf, fast_exp((mg - np.where(m > -np.inf, m, F32(0))[..., None]).astype(F32)), F32(0))
            s = tree((sg * scale).astype(F32))
    return s.reshape(lead)


METAL_FAST = Intrinsics("Metal fast math", fast_exp, fast_log, fast_reciprocal, fast_divide)
"""fast::exp, fast::log, and fast math's 1.0 / s (1 ulp) and x / t (2.5 ulp)."""

METAL = Arith("metal_fast_math", block_sum, block_scan, reciprocal=True, fast=METAL_FAST,
              looped=lambda z: mlx_looped_sum(z))
"""MLX's softmax kernels with Table 8.2's intrinsics: 32-lane SIMD sums and a threadgroup tree up
to 4,096 logits, the looped one-pass kernel above (``mlx_looped_sum``), x·(1 / s)."""
