"""Near-threshold sampler bugs: each replaces one gpu_impl function with a version that is wrong
by a few to a few thousand u, or by one ulp of a threshold, or by a subtle semantic slip.

Precision bugs reuse the conforming engines' code with one arithmetic step degraded (an
``Arith`` subclass), so the bug is the only difference from a correct engine. ``# the bug``
marks it. Factories take the base module (gpu_impl) and return the replacement.
"""
from __future__ import annotations

from types import ModuleType
from typing import Any, Callable

import ml_dtypes
import numpy as np

from gpu_impl._array import as_logits, nonneg, require_candidates, row_param
from properties.zoo.conforming._arith import F32, Arith, f64_scan, f64_sum, sequential_scan
from properties.zoo.conforming._samplers import Choices, make_dist, make_softmax, make_top_p

BF16, F16 = ml_dtypes.bfloat16, np.float16
Factory = Callable[[ModuleType], Callable[..., Any]]


def _pairwise_sum(e: np.ndarray) -> np.ndarray:
    return e.sum(axis=-1, dtype=F32)


class _Fp16Exp(Arith):
    def exp(self, d: np.ndarray) -> np.ndarray:
        return np.exp(d.astype(F16)).astype(F32)  # the bug: exp's argument and result in fp16


class _RoundedProbs(Arith):
    """Probabilities stored in a 16-bit buffer (``name``: its dtype) before they are accumulated."""

    def normalise(self, e: np.ndarray, s: np.ndarray) -> np.ndarray:
        store = {"float16": F16, "bfloat16": BF16}[self.name]
        return super().normalise(e, s).astype(store).astype(F32)  # the bug: p rounded to 16 bits


def _bf16_scan(p: np.ndarray) -> np.ndarray:
    return np.cumsum(p.astype(BF16), axis=-1, dtype=BF16).astype(F32)  # the bug: a bf16 running sum


def softmax_fp16_exp(base: ModuleType) -> Callable[..., Any]:
    return make_softmax(_Fp16Exp("fp16_exp", _pairwise_sum, sequential_scan), Choices())


def softmax_no_max(base: ModuleType) -> Callable[..., Any]:
    def softmax(logits: Any) -> np.ndarray:
        _, x, _ = as_logits(logits)
        with np.errstate(over="ignore", invalid="ignore"):
            e = np.exp(x)  # the bug: no max subtraction (overflow past 88.7, underflow below -87.3)
            s = e.sum(axis=1, keepdims=True)
            return e / np.where(s > 0, s, F32(1))
    return softmax


def top_p_bf16_cumsum(base: ModuleType) -> Callable[..., Any]:
    return make_top_p(Arith("bf16_scan", _pairwise_sum, _bf16_scan), Choices())


def top_p_fp16_probs(base: ModuleType) -> Callable[..., Any]:
    return make_top_p(_RoundedProbs("float16", _pairwise_sum, sequential_scan), Choices())


def dist_bf16_probs(base: ModuleType) -> Callable[..., Any]:
    return make_dist(_RoundedProbs("bfloat16", f64_sum, f64_scan), Choices())


def dist_float_running_sum(base: ModuleType) -> Callable[..., Any]:
    """llama.cpp's dist (expf weights, a double total S, target S·u) with the running sum
    declared float: a sequential float32 scan in token order that stalls once a weight is below
    half an ulp of the sum (after a spike) and drifts where weights shrink along the row."""
    def dist(logits: Any, u: Any) -> np.ndarray:
        xp, x, m = as_logits(logits)
        require_candidates(xp, m, "dist")  # refuses what gpu_impl refuses: only the running sum differs
        u = np.asarray(u, dtype=np.float64).reshape(-1)
        with np.errstate(invalid="ignore", over="ignore"):
            e = np.where(x > -np.inf, np.exp(x - m[:, None]), F32(0)).astype(F32)
        total = e.astype(np.float64).sum(axis=1)
        run = np.cumsum(e, axis=1, dtype=F32)  # the bug: the running sum in float
        hit = (run.astype(np.float64) >= (total * u)[:, None]) & (e > 0)
        last = np.where(e > 0, np.arange(x.shape[1]), -1).max(axis=1)
        return np.where(hit.any(axis=1), np.argmax(hit, axis=1), last).astype(np.int64)
    return dist


def _p32(p: Any, logits: Any) -> np.ndarray:
    return row_param(p, np.asarray(logits).shape[0], "p", np)


def top_p_one_ulp_up(base: ModuleType) -> Callable[..., Any]:
    def top_p(logits: Any, p: Any, min_keep: Any = 0) -> np.ndarray:
        p32 = _p32(p, logits)
        # the bug: the threshold rounded up by one float32 step (p >= 1 still returns early)
        return base.top_p(logits, np.where(p32 < 1, np.nextafter(p32, F32(np.inf)), p32), min_keep)
    return top_p


def _min_p_with(threshold: Callable[[np.ndarray, np.ndarray], np.ndarray]) -> Factory:
    """min_p on logits with the threshold computed by ``threshold(row max, p)``; llama.cpp's
    fallback (the first max(min_keep, 1) tokens in order) when too few survive."""
    def factory(base: ModuleType) -> Callable[..., Any]:
        def min_p(logits: Any, p: Any, min_keep: Any = 0) -> np.ndarray:
            _, x, m = as_logits(logits)
            B, V = x.shape
            p32 = row_param(p, B, "p", np)
            mk = nonneg(np, row_param(min_keep, B, "min_keep", np, integer=True), "min_keep")
            with np.errstate(divide="ignore", invalid="ignore"):
                keep = x >= threshold(m, p32)[:, None]
            need = np.minimum(np.maximum(mk, 1), V)
            out = np.where(keep, x, F32(-np.inf))
            short = keep.sum(axis=1) < need
            if short.any():  # the correct fallback, from gpu_impl itself (p = 1.01 keeps no token)
                fb = base.min_p(x, np.where(short, F32(1.5), p32), mk)
                out = np.where(short[:, None], fb, out)
            return np.where((p32 > 0)[:, None], out, x)
        return min_p
    return factory


# the bug: the threshold max + ln p moved one float32 step down (a token one ulp below survives)
min_p_one_ulp_down = _min_p_with(lambda m, p: np.nextafter(m + np.log(p), F32(-np.inf)))
# the bug: ln p evaluated in half precision (hlog), the threshold off by ~|ln p|·2^-11
min_p_half_log = _min_p_with(lambda m, p: m + np.log(p.astype(F16)).astype(F32))


def top_k_one_ulp_down(base: ModuleType) -> Callable[..., Any]:
    def top_k(logits: Any, k: Any) -> np.ndarray:
        _, x, _ = as_logits(logits)
        B, V = x.shape
        kk = row_param(k, B, "k", np, integer=True)
        out = base.top_k(x, kk)
        active = (kk > 0) & (kk < V)
        kth = -np.sort(-x, axis=1)[np.arange(B), np.clip(kk, 1, V) - 1]
        # the bug: a radix select whose cut sits one bit pattern low keeps x == kth - 1 ulp too
        extra = active[:, None] & (x == np.nextafter(kth, F32(-np.inf))[:, None]) & np.isfinite(kth)[:, None]
        return np.where(extra, x, out)
    return top_k


def mirostat_v2_stale_mu(base: ModuleType) -> Callable[..., Any]:
    def mirostat_v2(logits: Any, mu: Any, u: Any, tau: Any, eta: Any) -> tuple[np.ndarray, np.ndarray]:
        ids, _ = base.mirostat_v2(logits, mu, u, tau, eta)
        # the bug: the updated mu is never written back; the caller keeps the old one
        return ids, row_param(mu, ids.shape[0], "mu", np).astype(F32)
    return mirostat_v2


def mirostat_v2_surprise_before_renorm(base: ModuleType) -> Callable[..., Any]:
    def mirostat_v2(logits: Any, mu: Any, u: Any, tau: Any, eta: Any) -> tuple[np.ndarray, np.ndarray]:
        ids, _ = base.mirostat_v2(logits, mu, u, tau, eta)
        B = ids.shape[0]
        p = base.softmax(logits)[np.arange(B), ids].astype(np.float64)
        mu32 = row_param(mu, B, "mu", np)
        # the bug: the surprise of the chosen token read from the full-row softmax, not from the
        # distribution renormalised over the survivors (llama.cpp's second softmax)
        with np.errstate(divide="ignore"):
            new = mu32 - row_param(eta, B, "eta", np) * (-np.log2(p) - row_param(tau, B, "tau", np))
        return ids, new.astype(F32)
    return mirostat_v2
