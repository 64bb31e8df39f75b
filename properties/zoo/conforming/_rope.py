"""RoPE as ggml-CUDA's kernel computes it, built with -use_fast_math: theta_scale =
powf(base, -2/n_dims) on the host (float32, accurate), then per pair i on the device
theta_base = p·powf(theta_scale, i) — ``__powf`` under fast math, ex2(i·lg2(theta_scale)) — divided
by the pair's freq factor, YaRN's ramp mixing freq_scale·theta with theta, cosf / sinf of the
float32 angle times mscale, and the rotation in float32.

``fast_pow`` plays ``__log2f`` at its documented worst (2^-22 absolute for x in [0.5, 2], 2 ulp
elsewhere) and ex2.approx one ulp off (``fast_exp2``: exact at integers); the sine and cosine
are the float32-rounded values of the float32 angle (``__sinf``'s error outside [-π, π] is not
documented, so it is not modelled). Validation and the corner cases are gpu_impl's.
``make_rope`` is the same kernel with another frequency table and sine / cosine (the Metal
member's)."""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from gpu_impl.ops import rope as gpu_impl_rope
from gpu_impl.ops.rope import _corr_range
from properties.numerics.units import FAST_SINCOS_ABS, ulp32
from properties.zoo.conforming._arith import F32, off_by

LOG2F_ABS_NEAR_ONE = 2.0 ** -22
"""``__log2f``'s documented absolute error for x in [0.5, 2] (2 ulp elsewhere)."""


def fast_log2(x: np.ndarray) -> np.ndarray:
    """__log2f(x) at its documented worst, away from zero (exact at 1 and at powers of two)."""
    x = np.asarray(x, F32)
    exact = np.log2(x.astype(np.float64))
    near = (x >= 0.5) & (x <= 2)
    r = off_by(exact, np.where(near, LOG2F_ABS_NEAR_ONE, 2 * ulp32(exact)) * np.sign(exact))
    return np.where(np.frexp(x)[0] == 0.5, exact.astype(F32), r).astype(F32)


def fast_exp2(t: np.ndarray) -> np.ndarray:
    """ex2.approx(t): 2^t rounded, one ulp up (exact at an integer t)."""
    t = np.asarray(t, F32)
    r = np.exp2(t.astype(np.float64)).astype(F32)
    return np.where(t == np.floor(t), r, np.nextafter(r, F32(np.inf))).astype(F32)


def fast_pow(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """__powf(x, y) = ex2(y·__log2f(x)), each step in float32."""
    return fast_exp2((np.asarray(y, F32) * fast_log2(x)).astype(F32))


INV_2PI_F32 = F32(1 / (2 * math.pi))


def fast_sincos(theta: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """__sinf / __cosf of a float32 angle, modelled as the hardware's range reduction to
    revolutions in float32 (fl(θ·fl(1/2π)), its fraction exact) and the documented 2^-21.41 on
    the reduced angle, played away from zero. Outside [-π, π] the guide documents no bound: this
    is an assumption, measured on a device by ``properties.gpu.fast_math_premises``."""
    rev = (np.asarray(theta, F32) * INV_2PI_F32).astype(F32)
    frac = (rev - np.round(rev)).astype(np.float64) * 2 * math.pi
    sin, cos = np.sin(frac), np.cos(frac)
    return off_by(sin, np.sign(sin) * FAST_SINCOS_ABS), off_by(cos, np.sign(cos) * FAST_SINCOS_ABS)


def cuda_table(freq_base: float, nd: int) -> np.ndarray:
    """ggml-CUDA's frequencies: theta_scale = powf(base, -2/n_dims) on the host (correctly rounded),
    ``__powf(theta_scale, i)`` on the device."""
    theta_scale = F32(math.pow(F32(freq_base), F32(-2.0) / F32(nd)))
    return fast_pow(np.full(nd // 2, theta_scale, F32), np.arange(nd // 2, dtype=F32))


Table = Callable[[float, int], np.ndarray]
SinCos = Callable[[np.ndarray], tuple[np.ndarray, np.ndarray]]


def make_rope(table: Table, sincos: SinCos) -> Callable[..., np.ndarray]:
    """A RoPE kernel: pair i's frequency from ``table(freq_base, n_dims)``, the angle p·f_i and the
    rest in float32, sin and cos by ``sincos``."""
    def rope(x: Any, positions: Any, n_dims: int | None = None, mode: str = "normal",
             freq_base: float = 10000.0, freq_scale: float = 1.0, freq_factors: Any = None,
             ext_factor: float = 0.0, attn_factor: float = 1.0, beta_fast: float = 32.0,
             beta_slow: float = 1.0, n_ctx_orig: int = 0) -> np.ndarray:
        gpu_impl_rope(x, positions, n_dims, mode, freq_base, freq_scale, freq_factors, ext_factor,
                      attn_factor, beta_fast, beta_slow, n_ctx_orig)  # gpu_impl's refusals, its result unused
        a = np.asarray(x, F32)
        nd = a.shape[-1] if n_dims is None else int(n_dims)
        return _rotate(a, nd, positions, mode, table(freq_base, nd), freq_base, freq_scale, freq_factors,
                       ext_factor, attn_factor, beta_fast, beta_slow, n_ctx_orig, sincos)
    return rope


def _rotate(a: np.ndarray, nd: int, positions: Any, mode: str, freqs: np.ndarray, freq_base: float,
            freq_scale: float, freq_factors: Any, ext_factor: float, attn_factor: float, beta_fast: float,
            beta_slow: float, n_ctx_orig: int, sincos: SinCos) -> np.ndarray:
    half = nd // 2
    i = np.arange(half, dtype=F32)
    pos = np.asarray(positions).astype(F32)[:, None]
    with np.errstate(over="ignore", invalid="ignore"):
        theta = pos * freqs[None, :]
        if freq_factors is not None:
            theta = theta / np.asarray(freq_factors, F32)[:half][None, :]
        fs = F32(freq_scale)
        interp = fs * theta
        mscale = F32(attn_factor)
        if ext_factor != 0.0:
            lo, hi = _corr_range(nd, int(n_ctx_orig), float(freq_base), float(beta_fast), float(beta_slow))
            ramp = F32(1) - np.clip((i - F32(lo)) / F32(max(0.001, hi - lo)), F32(0), F32(1))
            mix = F32(ext_factor) * ramp
            theta = interp * (F32(1) - mix) + theta * mix
            mscale = mscale * (F32(1) + F32(0.1) * np.log(F32(1) / fs))
        else:
            theta = interp
        sin, cos = sincos(theta)
        cos, sin = (cos * mscale)[:, None, :], (sin * mscale)[:, None, :]
    rot = a[..., :nd]
    pairs = rot.reshape(a.shape[0], a.shape[1], half, 2) if mode == "normal" else rot.reshape(a.shape[0], a.shape[1], 2, half)
    u, w = (pairs[..., 0], pairs[..., 1]) if mode == "normal" else (pairs[..., 0, :], pairs[..., 1, :])
    with np.errstate(over="ignore", invalid="ignore"):
        new = np.stack([u * cos - w * sin, u * sin + w * cos], axis=-1 if mode == "normal" else -2)
    return np.concatenate([new.reshape(a.shape[0], a.shape[1], nd), a[..., nd:]], axis=-1)


rope = make_rope(cuda_table, fast_sincos)
"""ggml-CUDA's RoPE under -use_fast_math."""
