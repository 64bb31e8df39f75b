"""Per-request seeds for vLLM's exponential race on fixed-shape [B, V] rows.

``vllm_sample_seeded(logits, seeds, step=0, batch_seed=-1)`` draws each row's uniforms, then
runs ``vllm_sample`` (argmax(p / q), q = -log(1 - u)) on them. Seed convention, one integer per
row in ``seeds`` [B]:

- ``seeds[b] >= 0`` (below 2**63): row b owns a generator, Philox-4x64 keyed by ``seeds[b]``
  alone. Decode step ``step`` (>= 0) reads the ``step``-th block of that stream: counter
  ``step * ceil(V / 4)``, V doubles (a step uses ceil(V / 4) Philox blocks, so step s + 1
  continues where step s ended, to the block). The row's token therefore depends on its logits,
  its seed and the step only: never on the other rows, their seeds, the batch size or the row's
  position in the batch. Two rows with equal seeds and equal logits get equal tokens.
- ``seeds[b] == -1``: unseeded. Such rows share the batch generator, which serves them in row
  order, V doubles each: keyed by ``batch_seed + 2**64`` when ``batch_seed >= 0`` (a reproducible
  batch; the offset keeps it off every row's stream), and from fresh OS entropy at every call when
  ``batch_seed == -1`` (the default, as vLLM's global generator).
- any other value of a seed, or of ``batch_seed`` (below -1, 2**63 or more, not an integer) is a
  ``ValueError``.

The uniforms are drawn on the host (NumPy's Philox) and uploaded for CuPy rows.
"""
from __future__ import annotations

from typing import Any

import numpy as np

from gpu_impl._array import as_logits, row_param
from gpu_impl.engines.vllm import vllm_sample

UNSEEDED = -1
_BATCH_KEY = 2**64  # the batch generator's key offset: no row seed (< 2**63) reaches it
_SEED_LIMIT = 2**63


def _host_int(value: Any, name: str) -> int:
    v = value.get() if hasattr(value, "get") else value
    arr = np.asarray(v)
    if arr.ndim != 0 or arr.dtype == bool or arr.dtype.kind not in "iu":
        raise ValueError(f"{name} must be an integer scalar, got {v!r}")
    return int(arr)


def row_uniforms(seeds: Any, vocab: int, step: int = 0, batch_seed: int = UNSEEDED) -> np.ndarray:
    """The [B, V] float64 uniforms of ``vllm_sample_seeded`` (host NumPy), by the convention above."""
    host = np.asarray(seeds.get() if hasattr(seeds, "get") else seeds)
    s = row_param(host, host.size, "seeds", np, integer=True)
    step, batch_seed = _host_int(step, "step"), _host_int(batch_seed, "batch_seed")
    if bool(((s < UNSEEDED) | (s >= _SEED_LIMIT)).any()):
        raise ValueError(f"seeds must be -1 (unseeded) or in [0, 2**63), got {s.tolist()}")
    if step < 0:
        raise ValueError(f"step must be >= 0, got {step}")
    if not UNSEEDED <= batch_seed < _SEED_LIMIT:
        raise ValueError(f"batch_seed must be -1 (fresh entropy) or in [0, 2**63), got {batch_seed}")
    blocks = -(-vocab // 4)
    u = np.empty((s.size, vocab), dtype=np.float64)
    for b, seed in enumerate(s.tolist()):
        if seed != UNSEEDED:
            u[b] = np.random.Generator(np.random.Philox(key=seed, counter=step * blocks)).random(vocab)
    free = np.flatnonzero(s == UNSEEDED)
    if free.size:
        bit = (np.random.Philox() if batch_seed == UNSEEDED else
               np.random.Philox(key=batch_seed + _BATCH_KEY, counter=step * -(-(free.size * vocab) // 4)))
        u[free] = np.random.Generator(bit).random((free.size, vocab))
    return u


def vllm_sample_seeded(logits: Any, seeds: Any, step: Any = 0, batch_seed: Any = UNSEEDED) -> Any:
    """vLLM's race with per-request seeds: int64 [B] token ids; ``seeds`` [B] integers, -1 =
    unseeded (the batch generator, ``batch_seed``; -1 there = fresh entropy). See the module."""
    xp, x, _ = as_logits(logits)
    B, V = x.shape
    if hasattr(seeds, "get"):
        seeds = seeds.get()
    if np.ndim(seeds) != 1 or np.shape(seeds)[0] != B:
        raise ValueError(f"seeds has shape {tuple(np.shape(seeds))}, one seed per row needs ({B},)")
    u = row_uniforms(seeds, V, step, batch_seed)
    return vllm_sample(x, xp.asarray(u))
