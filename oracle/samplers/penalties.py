"""penalties(last_n, repeat, freq, present) and logit_bias(n_vocab, biases).

Repetition penalty follows llama.cpp's sign rule: a logit <= 0 is *multiplied* by ``repeat``
(so it moves further down), a positive one is divided. Then ``count·freq + present`` is
subtracted. The window is the last ``last_n`` accepted tokens.
"""
from __future__ import annotations

from collections import deque
from typing import Iterable, Mapping

import numpy as np

from oracle.candidates import TokenDataArray, identity_ids
from oracle.samplers.base import Empty, Sampler, check_finite


class Penalties(Sampler):
    name = "penalties"

    def __init__(self, last_n: int, repeat: float, freq: float, present: float) -> None:
        self.last_n = max(int(last_n), 0)
        self.repeat, self.freq, self.present = float(repeat), float(freq), float(present)
        self.reset()

    def reset(self) -> None:
        self.window: deque[int] = deque(maxlen=self.last_n)

    def accept(self, token: int) -> None:
        self.window.append(int(token))

    def counts_for(self, ids: np.ndarray) -> np.ndarray:
        """How often each candidate id occurs in the window."""
        if not self.window:
            return np.zeros(ids.size, dtype=np.int64)
        hist = np.asarray(self.window, dtype=np.int64)
        uniq, cnt = np.unique(hist, return_counts=True)
        if ids is identity_ids(ids.size):  # a raw row: candidate position = token id
            out = np.zeros(ids.size, dtype=np.int64)
            inside = (uniq >= 0) & (uniq < ids.size)
            out[uniq[inside]] = cnt[inside]
            return out
        pos = np.clip(np.searchsorted(uniq, ids), 0, uniq.size - 1)
        return np.where(uniq[pos] == ids, cnt[pos], 0)

    def apply(self, cur: TokenDataArray) -> None:
        c = self.counts_for(cur.ids)
        hit = np.flatnonzero(c)  # only the window's tokens change
        l = cur.logits[hit]
        scaled = np.where(l <= 0, l * self.repeat, l / self.repeat)
        out = cur.logits.copy()
        out[hit] = scaled - c[hit] * self.freq - self.present
        cur.logits = out
        cur.sorted = False


class LogitBias(Sampler):
    """Add a bias to each listed token id that is still a candidate; array order kept."""

    name = "logit-bias"

    def __init__(self, n_vocab: int, pairs: list[tuple[int, float]]) -> None:
        self.n_vocab = int(n_vocab)
        self.tokens = np.array([t for t, _ in pairs], dtype=np.int64)
        self.values = np.array([b for _, b in pairs], dtype=np.float64)

    def apply(self, cur: TokenDataArray) -> None:
        bias = np.zeros(self.n_vocab)
        np.add.at(bias, self.tokens, self.values)
        in_vocab = cur.ids < self.n_vocab
        cur.logits = cur.logits + np.where(in_vocab, bias[np.minimum(cur.ids, self.n_vocab - 1)], 0.0)
        # llama.cpp leaves ``sorted`` set here, so a later top_k/top_p/min_p trusts a stale order
        # (finding logit-bias-stale-sorted, replayed against llama.cpp in properties/peers/llama_cpp/findings.py).
        # The spec invalidates the order, as every other logit-changing sampler does.
        cur.sorted = False


def penalties(last_n: int, repeat: float, freq: float, present: float) -> Sampler:
    # common_sampler_init rejects these before llama.cpp ever computes with them
    check_finite("penalties", repeat=repeat, freq=freq, present=present)
    if not float(repeat) > 0 or not np.isfinite(1.0 / float(repeat)):
        raise ValueError(f"penalties: repeat={repeat} must be > 0 with a finite reciprocal")
    if int(last_n) <= 0 or (float(repeat) == 1 and float(freq) == 0 and float(present) == 0):
        return Empty("penalties")
    return Penalties(last_n, repeat, freq, present)


def logit_bias(n_vocab: int, biases: Mapping[int, float] | Iterable[tuple[int, float]]) -> Sampler:
    """Biases are ``{token: bias}`` or (token, bias) pairs (repeats add up, as llama.cpp does on
    an array in vocabulary order; on a sorted or truncated one it adds only a token's first entry:
    finding logit-bias-repeated-token-searched);
    -inf suppresses a token, +inf and NaN are rejected."""
    pairs = [(int(t), float(b)) for t, b in (biases.items() if isinstance(biases, Mapping) else biases)]
    for token, value in pairs:
        if not 0 <= int(token) < int(n_vocab):
            raise ValueError(f"logit_bias: token {token} is outside the vocabulary [0, {n_vocab})")
        if np.isnan(value) or value == np.inf:
            raise ValueError(f"logit_bias: bias {value} for token {token} must be finite or -inf")
    return Empty("logit-bias") if not pairs else LogitBias(n_vocab, pairs)
