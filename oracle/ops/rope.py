"""Rotary position embedding as ggml defines it (``ggml_rope_ext``), in float64.

x is ``[tokens, heads, head_dim]`` and ``positions`` holds one integer per token. The first
``n_dims`` entries of each head are rotated in ``n_dims / 2`` pairs; the rest pass through.
Pair i is (x[2i], x[2i+1]) in the normal layout and (x[i], x[i + n_dims/2]) in the NeoX
layout, and is rotated by

    theta_extrap = p · base^(-2i / n_dims) / freq_factors[i]
    theta_interp = freq_scale · theta_extrap
    theta        = theta_interp                                   (ext_factor == 0)
                 = theta_interp·(1 - r) + theta_extrap·r          (YaRN, r = ext_factor·ramp(i))
    ramp(i)      = 1 - clamp((i - lo) / max(0.001, hi - lo), 0, 1)
    [lo, hi]     = [max(0, floor(c(beta_fast))), min(n_dims - 1, ceil(c(beta_slow)))]
    c(beta)      = n_dims · ln(n_ctx_orig / (2π·beta)) / (2 ln base)

and scaled by ``mscale = attn_factor`` (times ``1 + 0.1·ln(1/freq_scale)`` when
ext_factor != 0). A freq_factor of 1e30 makes theta ≈ 0: the pair is left (almost) unrotated,
which is how partial-rotary models are expressed.

Refusals (ValueError, the same in gpu_impl): x not 3-D; n_dims odd, < 2 or > head_dim;
positions not an integer array of one entry per token; mode other than "normal"/"neox";
freq_base <= 1, freq_scale <= 0, non-finite ext/attn factors; freq_factors shorter than
n_dims/2 or not finite and > 0; ext_factor != 0 without n_ctx_orig > 0 and beta_fast, beta_slow
> 0. Negative positions are allowed (ggml uses them to shift a cache). NaN or inf in x
propagates (IEEE) into its own pair only.
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from oracle.ops._checks import as64, as_int, finite_scalar


def yarn_corr_dims(n_dims: int, n_ctx_orig: int, freq_base: float, beta_fast: float,
                   beta_slow: float) -> tuple[float, float]:
    """The pair-index range [lo, hi] over which YaRN's ramp goes from extrapolation to interpolation."""
    def corr(beta: float) -> float:
        return n_dims * math.log(n_ctx_orig / (beta * 2 * math.pi)) / (2 * math.log(freq_base))

    return max(0.0, math.floor(corr(beta_fast))), min(n_dims - 1.0, math.ceil(corr(beta_slow)))


def rope_angles(positions: np.ndarray, n_dims: int, freq_base: float, freq_scale: float,
                freq_factors: np.ndarray | None, ext_factor: float, attn_factor: float,
                corr: tuple[float, float]) -> tuple[np.ndarray, float]:
    """(theta [tokens, n_dims/2], mscale) from the formulas in the module docstring."""
    i = np.arange(n_dims // 2, dtype=np.float64)
    inv_freq = freq_base ** (-2.0 * i / n_dims)
    if freq_factors is not None:
        inv_freq = inv_freq / freq_factors[: n_dims // 2]
    extrap = positions.astype(np.float64)[:, None] * inv_freq[None, :]
    interp = freq_scale * extrap
    mscale = attn_factor
    if ext_factor == 0.0:
        return interp, mscale
    lo, hi = corr
    ramp = 1.0 - np.clip((i - lo) / max(0.001, hi - lo), 0.0, 1.0)
    mix = ext_factor * ramp
    mscale *= 1.0 + 0.1 * math.log(1.0 / freq_scale)
    return interp * (1.0 - mix) + extrap * mix, mscale


def rope(x: Any, positions: Any, n_dims: int | None = None, mode: str = "normal",
         freq_base: float = 10000.0, freq_scale: float = 1.0, freq_factors: Any = None,
         ext_factor: float = 0.0, attn_factor: float = 1.0, beta_fast: float = 32.0,
         beta_slow: float = 1.0, n_ctx_orig: int = 0) -> np.ndarray:
    a = as64(x, "x", ndim=3)
    tokens, _, head_dim = a.shape
    n_dims = head_dim if n_dims is None else int(n_dims)
    if n_dims < 2 or n_dims % 2 or n_dims > head_dim:
        raise ValueError(f"n_dims must be even and in [2, head_dim={head_dim}], got {n_dims}")
    pos = as_int(positions, "positions", ndim=1)
    if pos.shape[0] != tokens:
        raise ValueError(f"positions has {pos.shape[0]} entries but x has {tokens} tokens")
    if mode not in ("normal", "neox"):
        raise ValueError(f"mode must be 'normal' or 'neox', got {mode!r}")
    freq_base = finite_scalar(freq_base, "freq_base", lo=1.0, lo_open=True)
    freq_scale = finite_scalar(freq_scale, "freq_scale", lo=0.0, lo_open=True)
    ext_factor = finite_scalar(ext_factor, "ext_factor")
    attn_factor = finite_scalar(attn_factor, "attn_factor")
    ff = None
    if freq_factors is not None:
        ff = as64(freq_factors, "freq_factors", ndim=1)
        if ff.shape[0] < n_dims // 2 or not (np.isfinite(ff) & (ff > 0)).all():
            raise ValueError(f"freq_factors must hold >= {n_dims // 2} finite positive values, got {ff.shape[0]}")
    corr = (0.0, 0.0)
    if ext_factor != 0.0:
        if n_ctx_orig <= 0 or beta_fast <= 0 or beta_slow <= 0:
            raise ValueError("YaRN (ext_factor != 0) needs n_ctx_orig > 0 and beta_fast, beta_slow > 0")
        corr = yarn_corr_dims(n_dims, int(n_ctx_orig), freq_base, float(beta_fast), float(beta_slow))
    theta, mscale = rope_angles(pos, n_dims, freq_base, freq_scale, ff, ext_factor, attn_factor, corr)
    cos, sin = (mscale * np.cos(theta))[:, None, :], (mscale * np.sin(theta))[:, None, :]
    half = n_dims // 2
    first = np.arange(half) * 2 if mode == "normal" else np.arange(half)
    second = first + 1 if mode == "normal" else first + half
    out = a.copy()
    with np.errstate(invalid="ignore"):
        out[..., first] = a[..., first] * cos - a[..., second] * sin
        out[..., second] = a[..., first] * sin + a[..., second] * cos
    return out
