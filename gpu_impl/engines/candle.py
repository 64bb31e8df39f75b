"""candle's Gumbel-max sampler on fixed-shape [B, V] rows, with its noise supplied: U = 1e-7 +
u·(0.999 - 1e-7) (``rand_like(1e-7, 0.999)``, float32), g = -log(-log U), token =
argmax(l + T·g); T <= 0 is argmax. The repeat penalty is llama.cpp's window rule with the sign
test at 0 moved (l >= 0 ? l/r : l·r), which gives the same value at l = 0, so
``gpu_impl.penalties`` computes it."""
from __future__ import annotations

from typing import Any

from gpu_impl._array import above_zero, as_logits, param_xp, quiet, require_candidates, row_param, widen_exact
from gpu_impl.penalties import penalties

U_LO, U_HI = 1e-7, 0.999


def candle_repeat_penalty(logits: Any, history: Any, penalty: Any, last_n: Any) -> Any:
    return penalties(logits, history, last_n, penalty, 0.0, 0.0)


def candle_sample(logits: Any, t: Any, u: Any) -> Any:
    xp, x, row_max = as_logits(logits)
    require_candidates(xp, row_max, "candle_sample")
    B, V = x.shape
    tx = param_xp(xp, t)
    t = row_param(t, B, "t", tx)
    uu = xp.asarray(u, dtype=xp.float64)
    if uu.shape != (B, V) or bool(((uu < 0) | (uu >= 1)).any()):
        raise ValueError(f"u must be uniforms in [0, 1) of shape {(B, V)}, got shape {tuple(uu.shape)}")
    big_u = (U_LO + uu * (U_HI - U_LO)).astype(xp.float32)
    with quiet():
        g = -xp.log(-xp.log(big_u))
    wide = widen_exact(tx, t)
    if bool(((wide != 0) & (abs(wide) < 2.0 ** -126)).any()):
        # a subnormal T: CuPy's float32 kernels flush it (T·g = 0, T > 0 false), so the race runs
        # in float64 on both backends; T·g still breaks ties among the maximal logits, as candle's
        # float32 arithmetic on the CPU (no flush) does
        noisy = x.astype(xp.float64) + g.astype(xp.float64) * xp.asarray(wide)[:, None]
    else:
        tt = xp.asarray(t)[:, None]
        noisy = xp.where(tt == 1, x + g, x + g * tt)
    return xp.where(xp.asarray(above_zero(tx, t)), xp.argmax(noisy, axis=1), xp.argmax(x, axis=1)).astype(xp.int64)
