"""candle semantics, float64: ``candle_nn::sampling::gumbel_softmax`` with
``candle_transformers::utils::apply_repeat_penalty`` (as its examples wire them).

- repeat penalty: once per distinct id among the last ``repeat_last_n`` tokens of the context
  (prompt + output): l >= 0 ? l/r : l·r;
- temperature <= 0: argmax of the logits (first maximal index);
- otherwise token = argmax(l + T·g) with g = -log(-log U) and U drawn *uniform in
  [1e-7, 0.999)* (``rand_like(1e-7, 0.999)``), i.e. a Gumbel truncated to
  [G_LO, G_HI] = [-2.78, 6.91]. Untruncated Gumbel-max samples softmax(l/T) exactly; the
  truncation makes tokens more than (G_HI - G_LO)·T = 9.69·T below the max unreachable and moves
  every probability slightly (``distribution`` is the exact law of this rule, by quadrature).
candle's Gumbel path has no top_k / top_p / min_p (those are other ``Sampling`` modes).
"""
from __future__ import annotations

import math

import numpy as np

from oracle.engines.settings import Settings, as_row, first_argmax_onehot, require, softmax, uniforms, with_traits

NAME = "candle"
SUPPORTS = frozenset({"temperature", "repetition_penalty"})
TRAITS = dict(temp_first=True, min_p_space=None, ties=None, typical_position=None, typical_ties=None,
              top_p_renormalises=None, min_p_before_top_p=None, min_p_equal_kept=None, window=True, freq_scope=None,
              penalty_order="repetition first", law="truncated Gumbel-max", greedy="t <= 0", top_p_ties=None)
TOGGLES = frozenset({"law", "window"})  # untruncated Gumbel (the softmax law); no penalty window
U_LO, U_HI = 1e-7, 0.999
G_LO, G_HI = -math.log(-math.log(U_LO)), -math.log(-math.log(U_HI))
_NODES, _WEIGHTS = np.polynomial.legendre.leggauss(16)


def repeat_penalty(x: np.ndarray, history, penalty: float, last_n: int) -> np.ndarray:
    window = list(history)[-int(last_n):] if int(last_n) > 0 else []
    seen = np.unique(np.asarray([t for t in window if 0 <= int(t) < x.size], dtype=np.int64))
    out = x.copy()
    v = out[seen]
    out[seen] = np.where(v >= 0, v / float(penalty), v * float(penalty))
    return out


def penalised(logits: np.ndarray, s: Settings, **traits) -> np.ndarray:
    require(NAME, SUPPORTS, s)
    x = as_row(logits)
    last_n = s.repeat_last_n if with_traits(NAME, TRAITS, TOGGLES, traits)["window"] else max(len(s.history), 1)
    if s.repetition_penalty != 1.0:
        x = repeat_penalty(x, s.history, s.repetition_penalty, last_n)
    return x


def gumbel(u: np.ndarray) -> np.ndarray:
    """candle's noise from uniforms u in [0, 1): U = 1e-7 + u·(0.999 - 1e-7), g = -log(-log U)."""
    return -np.log(-np.log(U_LO + u * (U_HI - U_LO)))


def _cdf(g: np.ndarray) -> np.ndarray:
    """P[G <= g] for candle's truncated Gumbel."""
    with np.errstate(over="ignore"):
        return np.clip((np.exp(-np.exp(-g)) - U_LO) / (U_HI - U_LO), 0.0, 1.0)


def race_law(y: np.ndarray, normalise: bool = True) -> np.ndarray:
    """P[argmax(y + G) = i] for iid truncated Gumbels G; y = l/T (finite entries race).

    With U = exp(-exp(-G)) uniform on [U_LO, U_HI) and t = ln U, token a beats rival j iff
    U_j < U_a^{c_j}, c_j = exp(y_j - y_a), so
        P_a = ∫_{ln U_LO}^{ln U_HI} e^t Π_j clip((e^{c_j t} - U_LO) / (U_HI - U_LO), 0, 1) dt / (U_HI - U_LO),
    an integrand that is smooth in t except where a factor reaches 0 or 1 (t = ln U_LO / c_j,
    ln U_HI / c_j): split there and into even pieces, Gauss-Legendre on each. A token more than G_HI - G_LO below
    the max never wins.
    """
    live = np.flatnonzero(np.isfinite(y))
    out = np.zeros(y.size)
    z = y[live]
    t_lo, t_hi, width = math.log(U_LO), math.log(U_HI), U_HI - U_LO
    for a in np.flatnonzero(z >= z.max() - (G_HI - G_LO)):
        gaps = np.delete(z, a) - z[a]
        c = np.exp(gaps[gaps > G_LO - G_HI])  # rivals that can beat token a at all
        # the integrand is at most ~e^{(1 + Σc) t}: below t_start it holds < e^-40 of the mass, and
        # 10 even pieces above keep each piece's exponent range <= 4 (16 nodes: float64-exact)
        t_start = max(t_lo, -40.0 / (1.0 + c.sum()))
        kinks = np.concatenate([t_lo / c, t_hi / c])
        edges = np.unique(np.concatenate([np.linspace(t_start, t_hi, 11),
                                          kinks[(kinks > t_start) & (kinks < t_hi)]]))
        lo, hi = edges[:-1, None], edges[1:, None]
        t = 0.5 * (hi - lo) * _NODES[None, :] + 0.5 * (hi + lo)                  # [pieces, nodes]
        f = np.exp(t) * np.prod(np.clip((np.exp(t[..., None] * c) - U_LO) / width, 0.0, 1.0), axis=-1)
        out[live[a]] = float((0.5 * (hi - lo)[:, 0]) @ (f @ _WEIGHTS)) / width
    return out / out.sum() if normalise else out  # unnormalised: a quadrature self-check (sums to 1)


def distribution(logits: np.ndarray, s: Settings, **traits) -> np.ndarray:
    x = penalised(logits, s, **traits)
    if not float(s.temperature) > 0:
        return first_argmax_onehot(x)
    if with_traits(NAME, TRAITS, TOGGLES, traits)["law"] == "softmax":
        return softmax(x / float(s.temperature))  # untruncated Gumbel-max samples the softmax exactly
    return race_law(x / float(s.temperature))


def sample(logits: np.ndarray, s: Settings, noise) -> int:
    x = penalised(logits, s)
    if not float(s.temperature) > 0:
        return int(np.argmax(x))
    g = gumbel(uniforms(noise, x.size))
    t = float(s.temperature)
    return int(np.argmax(x + g if t == 1.0 else x + g * t))


def ideal_sample(logits: np.ndarray, t: float, noise) -> int:
    """Untruncated Gumbel-max (U uniform in (0, 1)): samples softmax(l/t) exactly."""
    x = as_row(logits)
    u = uniforms(noise, x.size)
    with np.errstate(divide="ignore"):
        g = -np.log(-np.log(np.where(u > 0, u, np.nextafter(0.0, 1.0))))
    return int(np.argmax(x / float(t) + g))
