"""RoPE with ggml's parameters (normal / NeoX layout, freq_factors, YaRN), float32 rotation.

The per-pair frequency is a host-side float64 table, folded with YaRN's ramp into one effective
frequency per pair (theta is linear in the position, so interp·(1-r) + extrap·r = p·f_eff) and
rounded once to fp32; the device then does theta = p·f_eff, one cos/sin table per token, and
a rotation over a reshaped view of the pairs. Refusals as in the oracle (see gpu_impl.ops).
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np

from gpu_impl.ops._xp import array_module, f32, ints, ndim, quiet, scalar


def _corr_range(n_dims: int, n_ctx_orig: int, base: float, beta_fast: float, beta_slow: float) -> tuple[float, float]:
    # the pair index at which a wavelength completes beta rotations over the original context
    def pair_at(beta: float) -> float:
        return n_dims * math.log(n_ctx_orig / (beta * 2 * math.pi)) / (2 * math.log(base))

    return max(0.0, math.floor(pair_at(beta_fast))), min(n_dims - 1.0, math.ceil(pair_at(beta_slow)))


def _frequencies(n_dims: int, base: float, freq_scale: float, factors: np.ndarray | None,
                 ext_factor: float, yarn: tuple[int, float, float]) -> np.ndarray:
    """Effective float64 frequency per pair (host side; n_dims/2 values)."""
    k = np.arange(0, n_dims, 2, dtype=np.float64)  # 2i
    raw = np.exp(-k / n_dims * math.log(base))
    if factors is not None:
        raw = raw / factors
    if ext_factor == 0.0:
        return raw * freq_scale
    lo, hi = _corr_range(n_dims, yarn[0], base, yarn[1], yarn[2])
    r = ext_factor * (1.0 - np.clip((k / 2 - lo) / max(0.001, hi - lo), 0.0, 1.0))
    return raw * (freq_scale + r * (1.0 - freq_scale))


def rope(x: Any, positions: Any, n_dims: int | None = None, mode: str = "normal",
         freq_base: float = 10000.0, freq_scale: float = 1.0, freq_factors: Any = None,
         ext_factor: float = 0.0, attn_factor: float = 1.0, beta_fast: float = 32.0,
         beta_slow: float = 1.0, n_ctx_orig: int = 0) -> Any:
    xp = array_module(x)
    a = f32(xp, x, "x")
    ndim(a, 3, "x")
    n_tok, n_head, head_dim = a.shape
    nd = head_dim if n_dims is None else int(n_dims)
    if nd % 2 or not 2 <= nd <= head_dim:
        raise ValueError(f"n_dims must be even and in [2, head_dim={head_dim}], got {nd}")
    pos = ints(xp, positions, "positions", ndim=1)
    if pos.shape[0] != n_tok:
        raise ValueError(f"positions has {pos.shape[0]} entries but x has {n_tok} tokens")
    if mode not in ("normal", "neox"):
        raise ValueError(f"mode must be 'normal' or 'neox', got {mode!r}")
    base = scalar(freq_base, "freq_base", above=1.0)
    fs = scalar(freq_scale, "freq_scale", above=0.0)
    ext = scalar(ext_factor, "ext_factor")
    mscale = scalar(attn_factor, "attn_factor")
    factors = None
    if freq_factors is not None:
        ff = freq_factors.get() if hasattr(freq_factors, "get") else freq_factors
        factors = np.asarray(ff).astype(np.float64)
        if factors.ndim != 1 or factors.shape[0] < nd // 2 or not (np.isfinite(factors) & (factors > 0)).all():
            raise ValueError(f"freq_factors must hold >= {nd // 2} finite positive values, got shape {factors.shape}")
        factors = factors[: nd // 2]
    if ext != 0.0:
        if n_ctx_orig <= 0 or beta_fast <= 0 or beta_slow <= 0:
            raise ValueError("YaRN (ext_factor != 0) needs n_ctx_orig > 0 and beta_fast, beta_slow > 0")
        mscale *= 1.0 + 0.1 * math.log(1.0 / fs)
    freq = xp.asarray(_frequencies(nd, base, fs, factors, ext, (int(n_ctx_orig), beta_fast, beta_slow)),
                      dtype=xp.float32)
    theta = pos.astype(xp.float32)[:, None] * freq[None, :]  # [T, nd/2]
    cos = (xp.cos(theta) * xp.float32(mscale))[:, None, :]
    sin = (xp.sin(theta) * xp.float32(mscale))[:, None, :]
    rot = a[..., :nd]
    # normal: pairs are adjacent (…, nd/2, 2); NeoX: the two halves (…, 2, nd/2)
    pairs = rot.reshape(n_tok, n_head, nd // 2, 2) if mode == "normal" else rot.reshape(n_tok, n_head, 2, nd // 2)
    u, w = (pairs[..., 0], pairs[..., 1]) if mode == "normal" else (pairs[..., 0, :], pairs[..., 1, :])
    with quiet():
        new = xp.stack([u * cos - w * sin, u * sin + w * cos], axis=-1 if mode == "normal" else -2)
    return xp.concatenate([new.reshape(n_tok, n_head, nd), a[..., nd:]], axis=-1)
