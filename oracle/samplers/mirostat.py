"""mirostat (v1), mirostat_v2 and adaptive_p: samplers that select and keep a running target."""
from __future__ import annotations

import math

import numpy as np

from oracle.candidates import TokenDataArray
from oracle.rng import Mt19937, resolve_seed
from oracle.samplers.base import Sampler, check_finite
from oracle.samplers.truncation import apply_top_k


class _Seeded(Sampler):
    seed = 0

    def reset(self) -> None:
        self.rng = Mt19937(resolve_seed(self.seed))
        self.reset_state()

    def reset_state(self) -> None:
        pass


class Mirostat(_Seeded):
    """v1: estimate the Zipf exponent from the top m tokens, derive k, top-k, sample, update mu."""

    name = "mirostat"

    def __init__(self, n_vocab: int, seed: int, tau: float, eta: float, m: int) -> None:
        self.n_vocab, self.seed, self.tau, self.eta, self.m = int(n_vocab), seed, float(tau), float(eta), int(m)
        self.reset()

    def reset_state(self) -> None:
        self.mu = 2.0 * self.tau

    def apply(self, cur: TokenDataArray) -> None:
        cur.softmax(do_sort=True)
        n = min(self.m - 1, cur.size - 1)
        i = np.arange(max(n, 0))
        t = np.log((i + 2) / (i + 1))
        # NumPy scalars, so that 0/0, x/0 and overflow give nan/inf as in llama.cpp's float code
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            b = np.log(cur.p[i] / cur.p[i + 1])
            s_hat = np.float64((t * b).sum()) / np.float64((t * t).sum())
            eps = s_hat - 1
            k = ((eps * np.exp2(self.mu)) / (1 - np.float64(self.n_vocab) ** (-eps))) ** (1 / s_hat)
        self.k = float(k)
        # llama.cpp's int(k) is undefined for NaN/inf/k >= 2^31 (x86-64 yields INT_MIN, hence top-1:
        # finding "mirostat-k-overflow"); the oracle keeps the intent: k tokens, at most all of them
        k_int = int(min(max(k, 1.0), cur.size)) if np.isfinite(k) else cur.size
        apply_top_k(cur, k_int)
        cur.softmax(do_sort=True)
        cur.selected = self.rng.discrete(cur.p)
        self.mu -= self.eta * (-math.log2(cur.p[cur.selected]) - self.tau)


class MirostatV2(_Seeded):
    """v2: drop tokens whose surprise -log2 p exceeds mu (keep >= 1), renormalise, sample, update mu."""

    name = "mirostat-v2"

    def __init__(self, seed: int, tau: float, eta: float) -> None:
        self.seed, self.tau, self.eta = seed, float(tau), float(eta)
        self.reset()

    def reset_state(self) -> None:
        self.mu = 2.0 * self.tau

    def apply(self, cur: TokenDataArray) -> None:
        cur.softmax(do_sort=True)
        with np.errstate(divide="ignore"):
            too_surprising = -np.log2(cur.p) > self.mu
        stop = int(np.argmax(too_surprising)) if too_surprising.any() else cur.size
        cur.keep(slice(0, max(stop, 1)))
        cur.softmax(do_sort=True)
        cur.selected = self.rng.discrete(cur.p)
        self.mu -= self.eta * (-math.log2(cur.p[cur.selected]) - self.tau)


# adaptive-p reshapes logits around a moving probability target; its constants are llama.cpp's
_PEAK_LOGIT, _SHARPNESS, _WIDTH = 5.0, 10.0, 0.3


class AdaptiveP(_Seeded):
    """Select tokens whose probability is near an adapted target (EMA of selected original p).

    The EMA moves only when the accepted token is the one this sampler just selected (llama.cpp
    keeps the pending token id and ignores any other accept). A target outside [0, 1] enters the
    EMA's initial state as given but is clamped where the adapted target is formed.
    """

    name = "adaptive-p"

    def __init__(self, target: float, decay: float, seed: int) -> None:
        self.target, self.decay, self.seed = float(target), min(max(float(decay), 0.0), 0.99), seed
        self.reset()

    def reset_state(self) -> None:
        self.weighted_sum = self.target / (1 - self.decay)
        self.total_weight = 1 / (1 - self.decay)
        self.pending: tuple[int, float] | None = None  # (token id, its original p)

    def apply(self, cur: TokenDataArray) -> None:
        cur.softmax(do_sort=False)
        if self.target < 0:
            cur.selected = self.rng.discrete(cur.p)
            return
        original_p = cur.p.copy()
        target = min(max(self.target, 0.0), 1.0)
        adapted = target if self.total_weight == 0 else 2 * target - self.weighted_sum / self.total_weight
        adapted = min(max(adapted, 0.0), 1.0)
        d = np.abs(cur.p - adapted) / _WIDTH
        finite = np.isfinite(cur.logits)
        cur.logits = np.where(finite, _PEAK_LOGIT - _SHARPNESS * d * d / (1 + d), cur.logits)
        cur.softmax(do_sort=False)
        cur.selected = self.rng.discrete(cur.p)
        self.pending = (int(cur.ids[cur.selected]), float(original_p[cur.selected]))

    def accept(self, token: int) -> None:
        if self.pending is not None and self.pending[0] == int(token):
            self.weighted_sum = self.pending[1] + self.decay * self.weighted_sum
            self.total_weight = 1 + self.decay * self.total_weight
        self.pending = None


def mirostat(n_vocab: int, seed: int, tau: float, eta: float, m: int = 100) -> Sampler:
    check_finite("mirostat", tau=tau, eta=eta)
    return Mirostat(n_vocab, seed, tau, eta, m)


def mirostat_v2(seed: int, tau: float, eta: float) -> Sampler:
    check_finite("mirostat_v2", tau=tau, eta=eta)
    return MirostatV2(seed, tau, eta)


def adaptive_p(target: float, decay: float, seed: int) -> Sampler:
    check_finite("adaptive_p", target=target, decay=decay)
    return AdaptiveP(target, decay, seed)
