"""Summation orders that correct engines use, emulated in float32 with NumPy.

Every function reduces (or scans) the last axis of a float32 array and rounds each addition
to float32 in the order the named engine pattern performs it. None is more or less correct
than another: they are the legal choices a judge must accept (see
the project's calibration notes, design/calibration.md §2, for their error models):

- ``sequential``: one float accumulator in index order, the C/C++/Rust CPU loop
  (llama.cpp's ``softmax_impl`` and cumulative masses). NumPy's ``cumsum`` is a strict
  left-to-right float32 accumulation, so its last column is that loop's result.
- ``block``: a CUDA block of T threads; thread t sums x[t], x[t+T], ... in order, then a
  warp shuffle tree over 32 lanes and a shared-memory tree over the warps (ggml-CUDA's
  ``soft_max_f32`` / ``rms_norm_f32`` shape). ``block_scan`` is the matching inclusive scan:
  a blocked arrangement (each thread owns a contiguous run), a thread-local running sum, a
  Kogge-Stone scan of the thread totals.
- ``kahan``: compensated summation over 1,024 lanes, lanes merged by an error-free TwoSum tree;
  ``kahan_scan`` is a blocked compensated scan.
- ``f64``: accumulate in double, round once (ggml-CPU's ``ggml_float`` sums, llama.cpp's dist).
- ``online``: a single pass over tiles with a running max, rescaling the running sum whenever
  the max grows (FlashAttention / FlashInfer's online softmax).

``fast_exp`` is CUDA's fast-math exponential (``__expf``, FlashInfer's ``ptx_exp2`` path):
ex2.approx of the float32 product fl(d·fl(log2 e)), the approximation's own error played as one
ulp up or down (none at an integer power, where the hardware's table is exact: __expf(0) = 1), and
results below the normal range flushed to zero (.ftz).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from properties.numerics.units import FAST_LOGF_ABS, ulp32

F32 = np.float32
WARP = 32


def _rows(x: np.ndarray) -> tuple[np.ndarray, tuple[int, ...]]:
    a = np.ascontiguousarray(x, dtype=F32)
    return a.reshape(-1, a.shape[-1]), a.shape[:-1]


def _pad(a: np.ndarray, width: int) -> np.ndarray:
    """Zero-pad the last axis to ``width`` (adding 0.0 is exact, so padding never rounds)."""
    extra = width - a.shape[-1]
    return a if extra == 0 else np.concatenate([a, np.zeros(a.shape[:-1] + (extra,), F32)], axis=-1)


def tree(a: np.ndarray) -> np.ndarray:
    """Halving tree over a power-of-two last axis: lane i += lane i + w/2 (a shuffle-xor warp
    reduction leaves exactly this value in lane 0)."""
    while a.shape[-1] > 1:
        h = a.shape[-1] // 2
        a = a[..., :h] + a[..., h:]
    return a[..., 0]


def sequential_sum(x: np.ndarray) -> np.ndarray:
    a, lead = _rows(x)
    return np.cumsum(a, axis=-1, dtype=F32)[:, -1].reshape(lead)


def sequential_scan(x: np.ndarray) -> np.ndarray:
    return np.cumsum(np.asarray(x, dtype=F32), axis=-1, dtype=F32)


def threads_for(n: int, cap: int = 1024) -> int:
    """ggml-CUDA's launch: the smallest power of two >= n, at least one warp, at most ``cap``."""
    t = WARP
    while t < n and t < cap:
        t *= 2
    return t


def block_sum(x: np.ndarray, threads: int | None = None) -> np.ndarray:
    a, lead = _rows(x)
    n = a.shape[-1]
    t = threads or threads_for(n)
    per = -(-n // t)
    strided = _pad(a, per * t).reshape(a.shape[0], per, t)  # [row, step, thread]: x[t + step*T]
    partial = np.cumsum(strided, axis=1, dtype=F32)[:, -1, :]  # each thread's in-order sum
    warps = tree(partial.reshape(a.shape[0], t // WARP, WARP))  # warp shuffle tree
    return tree(_pad(warps, WARP)).reshape(lead)  # warp sums in shared memory, one more warp tree


def _kogge_stone(v: np.ndarray) -> np.ndarray:
    """Inclusive scan over the last axis by doubling offsets (zeros shifted in are exact)."""
    off = 1
    while off < v.shape[-1]:
        shifted = np.concatenate([np.zeros(v.shape[:-1] + (off,), F32), v[..., :-off]], axis=-1)
        v = v + shifted
        off *= 2
    return v


def block_scan(x: np.ndarray, threads: int = 1024) -> np.ndarray:
    a, lead = _rows(x)
    n = a.shape[-1]
    t = min(threads, threads_for(n))
    per = -(-n // t)
    runs = _pad(a, per * t).reshape(a.shape[0], t, per)  # thread t owns items [t*per, (t+1)*per)
    local = np.cumsum(runs, axis=2, dtype=F32)
    totals = local[:, :, -1].reshape(a.shape[0], -1, min(t, WARP))
    warp_inc = _kogge_stone(totals)  # scan inside each warp
    warp_off = _kogge_stone(_pad(warp_inc[:, :, -1], warp_inc.shape[1]))  # scan of warp totals
    warp_off = np.concatenate([np.zeros((a.shape[0], 1), F32), warp_off[:, :-1]], axis=1)
    thread_inc = warp_inc + warp_off[:, :, None]
    thread_exc = np.concatenate([np.zeros((a.shape[0], 1), F32), thread_inc.reshape(a.shape[0], -1)[:, :-1]], 1)
    out = local + thread_exc[:, :, None]
    return out.reshape(a.shape[0], -1)[:, :n].reshape(lead + (n,))


def _two_sum(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """s = fl(a + b) and the exact rounding error e, a + b = s + e (Knuth)."""
    s = a + b
    bb = s - a
    return s, (a - (s - bb)) + (b - bb)


def kahan_sum(x: np.ndarray, lanes: int = 1024) -> np.ndarray:
    a, lead = _rows(x)
    n = a.shape[-1]
    w = min(lanes, threads_for(n, lanes))
    steps = _pad(a, -(-n // w) * w).reshape(a.shape[0], -1, w)
    s = np.zeros((a.shape[0], w), F32)
    c = np.zeros_like(s)
    for k in range(steps.shape[1]):  # Kahan in every lane
        y = steps[:, k, :] - c
        t = s + y
        c = (t - s) - y
        s = t
    c = -c  # Kahan's c holds the negated lost part
    while s.shape[-1] > 1:  # merge lanes: error-free sum of the heads, compensations added
        h = s.shape[-1] // 2
        s, e = _two_sum(s[:, :h], s[:, h:])
        c = c[:, :h] + c[:, h:] + e
    return (s[:, 0] + c[:, 0]).reshape(lead)


def kahan_scan(x: np.ndarray, block: int = 512) -> np.ndarray:
    a, lead = _rows(x)
    n = a.shape[-1]
    bw = min(block, n)
    nb = -(-n // bw)
    runs = _pad(a, nb * bw).reshape(a.shape[0], nb, bw)
    s = np.zeros((a.shape[0], nb), F32)
    c = np.zeros_like(s)
    heads, comps = np.empty_like(runs), np.empty_like(runs)
    for j in range(bw):  # compensated running sum inside every block
        y = runs[:, :, j] - c
        t = s + y
        c = (t - s) - y
        s = t
        heads[:, :, j], comps[:, :, j] = s, -c
    off_s = np.zeros((a.shape[0],), F32)
    off_c = np.zeros_like(off_s)
    out = np.empty_like(runs)
    for b in range(nb):  # compensated offsets carried across blocks
        hs, e = _two_sum(np.broadcast_to(off_s[:, None], heads[:, b].shape), heads[:, b])
        out[:, b] = hs + (off_c[:, None] + comps[:, b] + e)
        off_s, e = _two_sum(off_s, heads[:, b, -1])
        off_c = off_c + comps[:, b, -1] + e
    return out.reshape(a.shape[0], -1)[:, :n].reshape(lead + (n,))


def f64_sum(x: np.ndarray) -> np.ndarray:
    return np.asarray(x, dtype=np.float64).sum(axis=-1).astype(F32)


def f64_scan(x: np.ndarray) -> np.ndarray:
    return np.cumsum(np.asarray(x, dtype=np.float64), axis=-1).astype(F32)


def online_sum_exp(z: np.ndarray, tile: int = 256,
                   exp: Callable[[np.ndarray], np.ndarray] = np.exp) -> tuple[np.ndarray, np.ndarray]:
    """(running max, Σ exp(z - max)) in one pass over tiles: the sum is rescaled by
    exp(m_old - m_new) whenever a tile raises the max; inside a tile, a warp-style tree. ``exp``:
    the engine's exponential, for the terms and the rescale factors alike."""
    a, lead = _rows(z)
    m = np.full(a.shape[0], -np.inf, F32)
    s = np.zeros(a.shape[0], F32)
    with np.errstate(invalid="ignore", over="ignore"):
        for start in range(0, a.shape[1], tile):
            blk = a[:, start:start + tile]
            m_new = np.maximum(m, blk.max(axis=1))
            live = m_new > -np.inf  # an all -inf prefix contributes nothing yet
            base = np.where(live, m_new, F32(0))
            rescale = np.where(m > -np.inf, exp(m - base), F32(0))
            e = np.where(blk > -np.inf, exp(blk - base[:, None]), F32(0))
            s = s * rescale + tree(_pad(e, threads_for(e.shape[1], tile)))
            m = m_new
    return m.reshape(lead), s.reshape(lead)


LOG2E_F32 = F32(1.4426950408889634)


def fast_exp(d: np.ndarray) -> np.ndarray:
    """__expf(d) = ex2.approx.ftz(fl(d·fl(log2 e))): the product rounded to float32, 2^t rounded,
    then one ulp away from the correctly rounded value (towards +inf where t's last mantissa bit
    is set, towards 0 elsewhere: ex2.approx's documented error is up to 2 ulp, this uses one)
    unless t is an integer, and subnormal results flushed to zero."""
    with np.errstate(over="ignore", invalid="ignore", under="ignore"):
        t = (np.asarray(d, dtype=F32) * LOG2E_F32).astype(F32)
        r = np.exp2(t.astype(np.float64)).astype(F32)
        up = (t.view(np.uint32) & 1).astype(bool)
        moved = np.isfinite(r) & (r > 0) & (t != np.floor(t))  # 2^integer is a table entry: exact
        r = np.where(moved, np.nextafter(r, np.where(up, F32(np.inf), F32(0))), r).astype(F32)
        return np.where(np.abs(r) < np.finfo(F32).tiny, F32(0), r).astype(F32)


def ulps_away(q: np.ndarray, movable: np.ndarray, limit: float = 2.0) -> np.ndarray:
    """The float32 farthest from the float64 ``q``, away from zero, within ``limit`` ulp of it
    (where ``movable``; elsewhere q rounded), subnormal results flushed: a result at the worst of
    an intrinsic documented within ``limit`` ulp."""
    r = np.asarray(q, np.float64).astype(F32)
    moved = movable & np.isfinite(r) & (np.abs(r) >= np.finfo(F32).tiny)
    with np.errstate(invalid="ignore"):  # -inf rows: inf - inf, never taken
        for _ in range(int(limit) + 1):  # at most ⌊limit⌋ steps stay within limit ulp of q
            away = np.nextafter(r, np.copysign(F32(np.inf), r))
            ulp = np.abs(away.astype(np.float64) - r.astype(np.float64))
            r = np.where(moved & np.isfinite(away) & (np.abs(away.astype(np.float64) - q) <= limit * ulp), away, r)
    return np.where(np.abs(r) < np.finfo(F32).tiny, F32(0), r).astype(F32)


def fast_divide(x: np.ndarray, t: np.ndarray) -> np.ndarray:
    """x / t as ``-prec-div=false`` (nvcc ``-use_fast_math``) may give it: the float32 farthest
    from the exact quotient, away from zero, within the documented 2 ulp of it (the CUDA
    programming guide's maximum ulp errors); a power-of-two t divides exactly (its reciprocal is
    exact), and ±inf, 0 and subnormal quotients are the IEEE ones, flushed."""
    x, t = np.asarray(x, F32), np.asarray(t, F32)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        q = x.astype(np.float64) / t.astype(np.float64)
    return ulps_away(q, np.broadcast_to(np.frexp(t)[0] != 0.5, q.shape))


def fast_rsqrt(v: np.ndarray) -> np.ndarray:
    """rsqrtf(v) at its documented worst: 2 ulp off 1/√v, away from zero (exact where v is an even
    power of two)."""
    v = np.asarray(v, F32)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = 1.0 / np.sqrt(v.astype(np.float64))
    m, e = np.frexp(v)
    return ulps_away(q, ~((m == 0.5) & (e % 2 == 1)))


def off_by(exact: np.ndarray, off: np.ndarray) -> np.ndarray:
    """The float32 nearest exact + off that stays within |off| of ``exact``: an intrinsic played at
    its documented worst (rounding the shifted value could carry it past the bound)."""
    exact = np.asarray(exact, np.float64)
    r = (exact + off).astype(F32)
    over = np.abs(r.astype(np.float64) - exact) > np.abs(off)
    return np.where(over, np.nextafter(r, exact.astype(F32)), r).astype(F32)


def fast_log(x: np.ndarray) -> np.ndarray:
    """__logf(x) (``logf`` under -use_fast_math) at its documented worst: within 2^-21.41 absolute
    for x in [0.5, 2], 3 ulp elsewhere (the CUDA programming guide's intrinsic table); played as
    that far from ln x, upwards where x's last mantissa bit is set, downwards elsewhere. ln 1 = 0
    stays exact (the unit's table entry), as do ln 0 = -inf and non-finite x."""
    x = np.asarray(x, F32)
    with np.errstate(divide="ignore", invalid="ignore"):
        exact = np.log(x.astype(np.float64))
    sign = np.where((x.view(np.uint32) & 1).astype(bool), 1.0, -1.0)
    near = (x >= 0.5) & (x <= 2)
    finite = np.isfinite(exact)
    off = sign * np.where(near, FAST_LOGF_ABS, 3 * ulp32(np.where(finite, exact, 1.0)))
    with np.errstate(invalid="ignore"):
        r = off_by(np.where(finite, exact, 0.0), off)
    return np.where(~finite | (x == 1), exact.astype(F32), r).astype(F32)


LOOPED_ABOVE = 4096
"""MLX's softmax switches from its one-row kernel to its looped one above this many logits."""


@dataclass(frozen=True)
class Intrinsics:
    """A fast-math build's elementary operations, each at its documented worst."""

    name: str
    exp: Callable[[np.ndarray], np.ndarray]
    """e^d of a float32 argument."""
    log: Callable[[np.ndarray], np.ndarray]
    reciprocal: Callable[[np.ndarray], np.ndarray]
    """1 / s."""
    divide: Callable[[np.ndarray, np.ndarray], np.ndarray]
    """x / t."""


CUDA_FAST = Intrinsics("CUDA -use_fast_math", fast_exp, fast_log, lambda s: fast_divide(F32(1), s), fast_divide)
"""``__expf``, ``__logf``, and -prec-div=false's 1.0f / s and x / t (2 ulp off)."""


@dataclass(frozen=True)
class Arith:
    """One engine's arithmetic: how it sums, how it scans, how it normalises."""

    name: str
    sum: Callable[[np.ndarray], np.ndarray]
    scan: Callable[[np.ndarray], np.ndarray]
    reciprocal: bool = False
    """p = e · (1/s) (GPU kernels) instead of e / s."""
    online: bool = False
    """The softmax normaliser comes from ``online_sum_exp`` (one pass, rescaled)."""

    fast: Intrinsics | None = None
    """A fast-math build's exp, log and division (``CUDA_FAST``, ``_metal.METAL_FAST``), else
    expf, logf and IEEE division."""
    looped: Callable[[np.ndarray], np.ndarray] | None = None
    """The engine's own one-pass normaliser Σ exp(z - max) of rows longer than ``LOOPED_ABOVE``
    (MLX's looped softmax kernel)."""

    def normaliser(self, z: np.ndarray, e: np.ndarray) -> np.ndarray:
        """Σ e over the last axis as the engine forms it from the logits z (-inf where masked)
        and their exponentials e: a looped or online pass over z, or its sum of e."""
        if self.looped is not None and z.shape[-1] > LOOPED_ABOVE:
            return self.looped(z)
        if self.online:
            return online_sum_exp(z, exp=self.exp)[1]
        return self.sum(e)

    def exp(self, d: np.ndarray) -> np.ndarray:
        """expf of a float32 argument (NumPy's vectorised float32 exp, within an ulp or two), or
        the fast-math intrinsic."""
        return self.fast.exp(d) if self.fast else np.exp(d)

    def log(self, x: np.ndarray) -> np.ndarray:
        """logf (NumPy's float32 log), or the fast-math intrinsic."""
        return self.fast.log(x) if self.fast else np.log(x)

    def divide(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        """x / y: IEEE's, or the fast-math build's."""
        return self.fast.divide(x, y) if self.fast else x / y

    def normalise(self, e: np.ndarray, s: np.ndarray) -> np.ndarray:
        safe = np.where(s > 0, s, F32(1))
        if self.reciprocal:
            return e * (self.fast.reciprocal(safe) if self.fast else F32(1) / safe)
        return e / safe


SEQUENTIAL = Arith("sequential", sequential_sum, sequential_scan)
BLOCK = Arith("block", block_sum, block_scan, reciprocal=True)
ONLINE = Arith("online", block_sum, block_scan, reciprocal=True, online=True)
KAHAN = Arith("kahan", kahan_sum, kahan_scan)
FAST_MATH = Arith("fast_math", block_sum, block_scan, reciprocal=True, fast=CUDA_FAST)
F64 = Arith("f64", f64_sum, f64_scan)
