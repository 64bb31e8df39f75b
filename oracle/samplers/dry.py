"""dry(multiplier, base, allowed_length, last_n, breakers): "don't repeat yourself".

For every candidate that would extend a repeated suffix of the recent history of length
L >= allowed_length, subtract ``multiplier · base^(L - allowed_length)``. A sequence breaker
(given here as token-id sequences, as ``llama_sampler_init_dry_testing`` takes them) that
occurs in the history caps L at the distance back to it.
"""
from __future__ import annotations

import math
from collections import deque
from typing import Sequence

import numpy as np

from oracle.candidates import TokenDataArray
from oracle.samplers.base import Empty, Sampler, check_finite

_FLOAT_MAX_LOG = 88.7228391  # ln(FLT_MAX): llama.cpp clamps the exponent so base^x stays finite


class Dry(Sampler):
    name = "dry"

    def __init__(self, multiplier: float, base: float, allowed_length: int, last_n: int,
                 breakers: Sequence[Sequence[int]]) -> None:
        self.multiplier, self.base = float(multiplier), float(base)
        self.allowed_length, self.last_n = int(allowed_length), max(int(last_n), 0)
        self.breakers = [tuple(int(t) for t in b) for b in breakers if len(b) > 0]
        self.reset()

    def reset(self) -> None:
        self.history: deque[int] = deque(maxlen=self.last_n)

    def accept(self, token: int) -> None:
        self.history.append(int(token))

    def _repeat_limit(self, h: np.ndarray) -> int:
        """Cap on repeat length: how far back the newest complete breaker starts (llama.cpp's
        ``rep_limit``); a breaker b matches where ``h[end:end+len(b)] == b``."""
        n = h.size
        for back in range(n):  # back = 0 is the newest token
            end = n - 1 - back
            fits = [len(b) for b in self.breakers
                    if len(b) - 1 <= back and tuple(h[end:end + len(b)].tolist()) == b]
            if fits:
                return back - (max(fits) - 1)
        return n

    def penalty_lengths(self) -> dict[int, int] | None:
        """token -> longest repeat it would extend (only lengths >= allowed_length); None where
        llama.cpp returns before looking (history too short, or a breaker too recent)."""
        h = np.asarray(self.history, dtype=np.int64)
        n = h.size
        if n <= self.allowed_length:
            return None
        limit = self._repeat_limit(h)
        if limit < self.allowed_length:
            return None
        best: dict[int, int] = {}
        for end in range(n - 1):
            # length of the common suffix of h[:end+1] and h (capped by the breaker limit)
            a, b = h[: end + 1][::-1], h[::-1][: end + 1]
            mism = np.flatnonzero(a != b)
            length = min(int(mism[0]) if mism.size else end + 1, limit)
            if length >= self.allowed_length:
                token = int(h[end + 1])
                best[token] = max(best.get(token, 0), length)
        return best

    def apply(self, cur: TokenDataArray) -> None:
        best = self.penalty_lengths()
        if best is None:
            return  # llama.cpp returned early: not even the sorted flag changes
        single_breakers = {b[0] for b in self.breakers if len(b) == 1}
        max_exponent = int(_FLOAT_MAX_LOG / math.log(self.base)) if self.base > 1.000001 else 0
        amount = {}
        for token, length in best.items():
            if token not in single_breakers:
                exponent = length - self.allowed_length
                if max_exponent > 0:
                    exponent = min(exponent, max_exponent)
                amount[token] = self.multiplier * self.base**exponent
        logits = cur.logits.copy()
        if amount:  # the few penalised tokens, found among the candidates by binary search
            tokens = np.array(sorted(amount), dtype=np.int64)
            at = np.minimum(np.searchsorted(tokens, cur.ids), tokens.size - 1)
            hit = np.flatnonzero(tokens[at] == cur.ids)
            logits[hit] -= np.array([amount[int(t)] for t in cur.ids[hit]])
        cur.logits = logits
        cur.sorted = False


def dry(multiplier: float, base: float, allowed_length: int, last_n: int,
        breakers: Sequence[Sequence[int]] = ()) -> Sampler:
    check_finite("dry", multiplier=multiplier, base=base)
    # last_n < 0 disables it too (llama.cpp returns "?dry" since -1 stopped meaning "context size")
    if float(multiplier) == 0 or float(base) < 1 or int(last_n) <= 0:
        return Empty("dry")
    return Dry(multiplier, base, allowed_length, last_n, breakers)
