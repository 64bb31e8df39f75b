"""Logprob mutants hunted by the one runner with the logprob room's table
(``properties.engines.logprobs_checks.PROPERTIES``); each kill is replayed on gpu_impl, which must
pass it.

- ``logprob_zero``: every logprob 0.0 (llama.cpp #27972: llama-server with speculative decoding);
- ``raw_for_processed``: the logprobs read the logits the chain received, not the ones it produced
  (vLLM #9453: logprobs moved with the sampling parameters' raw/processed confusion);
- ``tile_duplicates``: a tiled top-n (per-tile argmax with -inf removal, then a merge) that
  repeats a tile's first id once the tile is all -inf (vLLM RFC #42259).
"""
from __future__ import annotations

import types

import numpy as np
import pytest

from properties.engines.logprobs_checks import PROPERTIES
from properties.zoo.runner import Domain, Mutant, host, hunt_and_replay, replaced, swapped


def _module(base: types.ModuleType, name: str, **fns) -> types.ModuleType:
    return swapped(base, name, **fns)


def _zero(base):
    def top_n(logits, n):
        ids, lps = base.logprobs_top_n(logits, n)
        return ids, np.zeros_like(lps)  # CuPy's own zeros on CuPy (__array_function__)
    return _module(base, "logprob_zero", logprobs_top_n=top_n,
                   logprobs_of=lambda logits, ids: np.zeros_like(base.logprobs_of(logits, ids)))


def _host(x) -> np.ndarray:
    """A float32 host copy of a NumPy or CuPy array (the mutant runs on every backend)."""
    return host(x).astype(np.float32, copy=False)


def _raw_for_processed(base):
    seen: dict[bytes, object] = {}

    def chained(name):
        def f(logits, *args):
            out = getattr(base, name)(logits, *args)
            seen[_host(out).tobytes()] = logits.copy()  # kept on the backend it came from
            return out
        return f

    def raw(logits):
        return seen.get(_host(logits).tobytes(), logits)

    return _module(base, "raw_for_processed", vllm_chain=chained("vllm_chain"), hf_chain=chained("hf_chain"),
                   llama_cpp_chain=chained("llama_cpp_chain"),
                   logprobs_of=lambda logits, ids: base.logprobs_of(raw(logits), ids),
                   logprobs_top_n=lambda logits, n: base.logprobs_top_n(raw(logits), n))


def _tile_duplicates(base, tile: int = 256):
    def top_n(logits, n):
        x = _host(logits)  # the tiles are walked on the host, on every backend
        B, V = x.shape
        all_ids, all_lps = base.logprobs_top_n(x, V)
        lp = np.empty_like(x)
        np.put_along_axis(lp, all_ids, all_lps, axis=1)
        w = tile if V > tile else max(1, V // 4)
        ids = np.empty((B, n), dtype=np.int64)
        for b in range(B):
            cand = []
            for t0 in range(0, V, w):
                work = lp[b, t0:t0 + w].copy()
                for _ in range(min(n, work.size)):
                    j = int(np.argmax(work))  # all -inf: the tile's first id, again and again
                    cand.append(t0 + j)
                    work[j] = -np.inf
            cand = np.asarray(cand)
            order = np.lexsort((cand, -lp[b, cand]))
            ids[b] = cand[order][:n]
        return ids, np.take_along_axis(lp, ids, axis=1)
    return _module(base, "tile_duplicates", logprobs_top_n=top_n)


MUTANTS = (
    Mutant("logprob_zero", "every logprob 0.0 (llama.cpp #27972)", frozenset({"logprobs_top_n", "logprobs_of"}),
           replaced(_zero)),
    Mutant("raw_for_processed", "raw logprobs where processed were asked (vLLM #9453)",
           frozenset({"logprobs_top_n", "logprobs_of", "vllm_chain", "hf_chain", "llama_cpp_chain"}),
           replaced(_raw_for_processed)),
    Mutant("tile_duplicates", "duplicate ids from all -inf tiles (vLLM RFC #42259)", frozenset({"logprobs_top_n"}),
           replaced(_tile_duplicates)),
)
EXPECTED_KILLER = {"logprob_zero": ("top_n", "logprob_of"), "raw_for_processed": ("processed_vs_raw",),
                   "tile_duplicates": ("top_n",)}
DOMAIN = Domain(
    "logprobs", "gpu_impl.engines",
    lambda: list(PROPERTIES),
    MUTANTS)
_KILLS: dict[str, dict] = {}


@pytest.mark.parametrize("mutant", DOMAIN.mutants, ids=str)
def test_logprobs_mutant_is_killed(backend, mutant):
    kill = hunt_and_replay(mutant, DOMAIN, backend, "calibration_logprobs", _KILLS)
    assert kill.property in EXPECTED_KILLER[mutant.name], f"{mutant.name} killed by {kill.property}: {kill.why[:300]}"
