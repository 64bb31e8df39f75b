"""llama.cpp's random streams, bit for bit, for libstdc++ builds.

Every random llama.cpp sampler owns a 32-bit ``std::mt19937``. libstdc++ turns its raw outputs
into draws as ``generate_canonical`` does:

- ``uniform_real_distribution<double>(0,1)``: two outputs, ``(x0 + x1·2^32) / 2^64`` in double,
  clamped below 1 (dist, and the uniforms llama.cpp uploads for backend dist);
- ``uniform_real_distribution<float>(0,1)``: one output, ``float(x0) / 2^32`` (XTC);
- ``discrete_distribution<int>``: normalise in double, partial sums with the last forced to 1,
  one double draw, ``lower_bound``; with fewer than two weights it returns 0 *without drawing*
  (mirostat, mirostat v2, adaptive-p).

NumPy's legacy ``RandomState(seed).randint(0, 2**32, dtype=uint32)`` yields exactly the raw
mt19937 outputs (one per value) - NumPy's ``random()`` uses another construction, so it is not used.
"""
from __future__ import annotations

import numpy as np

LLAMA_DEFAULT_SEED = 0xFFFFFFFF
_TWO32 = float(2**32)
_ONE_BELOW = np.nextafter(1.0, 0.0)
_ONE_BELOW_F32 = np.nextafter(np.float32(1.0), np.float32(0.0))


def resolve_seed(seed: int) -> int:
    """llama.cpp's ``get_rng_seed``: the default seed means a fresh random seed."""
    if not 0 <= int(seed) <= 0xFFFFFFFF:
        raise ValueError(f"seed must be a uint32, got {seed}")
    if int(seed) == LLAMA_DEFAULT_SEED:
        return int(np.random.SeedSequence().entropy % 2**32)
    return int(seed)


class _Outputs:
    """The raw outputs of one seeded mt19937, generated in blocks and shared by every copy of a
    stream: a judge copies each sampler before every step, and copying a ``RandomState`` costs
    ~0.7 ms (creating one, ~0.3 ms) against ~1 us for a position."""

    def __init__(self, seed: int) -> None:
        self._state = np.random.RandomState(seed)
        self._made = np.empty(0, dtype=np.uint32)

    def first(self, n: int) -> np.ndarray:
        if self._made.size < n:
            more = max(n - self._made.size, self._made.size, 256)
            self._made = np.concatenate([self._made, self._state.randint(0, 2**32, size=more, dtype=np.uint32)])
        return self._made[:n]


class Mt19937:
    """A ``std::mt19937`` stream with libstdc++'s double, float and discrete draws. A copy
    (``copy.deepcopy``) continues from the same position independently of the original."""

    def __init__(self, seed: int) -> None:
        self._outputs, self._at = _Outputs(seed), 0

    def raw(self, n: int = 1) -> np.ndarray:
        self._at += n
        return self._outputs.first(self._at)[self._at - n:].copy()

    def __deepcopy__(self, memo: dict) -> "Mt19937":
        twin = Mt19937.__new__(Mt19937)
        twin._outputs, twin._at = self._outputs, self._at
        return twin

    def uniform_double(self) -> float:
        x0, x1 = self.raw(2).astype(np.float64)
        u = (x0 + x1 * _TWO32) / (_TWO32 * _TWO32)
        return float(min(u, _ONE_BELOW))

    def uniform_float(self) -> float:
        u = np.float32(np.float32(self.raw(1)[0]) / np.float32(_TWO32))
        return float(min(u, _ONE_BELOW_F32))

    def discrete(self, weights: np.ndarray) -> int:
        return discrete_from_uniform(weights, self) if np.asarray(weights).size >= 2 else 0


def discrete_from_uniform(weights: np.ndarray, rng: Mt19937) -> int:
    """``std::discrete_distribution<int>(weights)(rng)`` for >= 2 weights (one double draw)."""
    w = np.asarray(weights, dtype=np.float64)
    total = w.sum()
    if not total > 0:
        raise ValueError("discrete distribution needs a positive total weight")
    cp = np.cumsum(w / total)
    cp[-1] = 1.0
    return int(np.searchsorted(cp, rng.uniform_double(), side="left"))


class Replay:
    """Stands in for ``Mt19937`` with given draws, so oracle and impl see the same uniforms."""

    def __init__(self, doubles: list[float] = (), floats: list[float] = ()) -> None:
        self._doubles, self._floats = list(doubles), list(floats)

    def uniform_double(self) -> float:
        return self._doubles.pop(0)

    def uniform_float(self) -> float:
        return self._floats.pop(0)

    def discrete(self, weights: np.ndarray) -> int:
        return discrete_from_uniform(weights, self) if np.asarray(weights).size >= 2 else 0
