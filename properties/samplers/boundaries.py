"""Cases on which a filter's boundary convention is observable exactly.

llama.cpp keeps top_p's crossing token (cum >= p), stops typical at cum > p, keeps min_p's
l >= max + ln p and xtc's p_i >= threshold. On ordinary rows the fp32 cumulative masses are
rounded, so the catalogue's allowance lets a decision within rounding of p go either way, and
">= versus >" is invisible. On a row of 2^j equal finite logits (the rest -inf: a row after an
earlier filter) every probability is 2^-j and every partial sum m·2^-j is exact in fp32, so with
p = m·2^-j (min_p: p = 1, threshold = max; xtc: threshold = 2^-j) the boundary is hit exactly and
the catalogue's variants carry no allowance (``exact_masses``). Hypothesis draws j, m, the
vocabulary and seeds; NumPy places the tokens.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
from hypothesis import strategies as st

from properties.samplers.record import SamplerRecord
from properties.samplers.records import RECORDS
from properties.samplers.strategies import DTYPES, Case

BOUNDARY_VOCABS = (1, 2, 4, 8, 17, 64, 100, 1000, 4096)


# record name -> (k finite tokens, m in [1, k]) -> the parameters that put the boundary on a token
BOUNDARY: dict[str, Callable[[int, int], dict]] = {r.name: r.boundary for r in RECORDS if r.boundary is not None}


def masked_uniform(vocab: int, k: int, seed: int, dtype: str) -> np.ndarray:
    """k equal finite logits at random positions, the rest -inf, in ``dtype``."""
    rng = np.random.default_rng(seed)
    row = np.full(vocab, -np.inf)
    row[rng.choice(vocab, size=k, replace=False)] = rng.normal(0, 3)
    return row.astype(np.float32).astype(DTYPES[dtype])


@st.composite
def exact_boundary_cases(draw: st.DrawFn, record: SamplerRecord, dtype: str, max_vocab: int = 4096) -> Case:
    vocab = draw(st.sampled_from([v for v in BOUNDARY_VOCABS if v <= max_vocab]), label="vocab")
    batch = draw(st.integers(1, 3), label="batch")
    top = int(np.log2(vocab))
    ks = [2 ** j for j in draw(st.lists(st.integers(0, top), min_size=batch, max_size=batch), label="log2 k")]
    ms = [draw(st.integers(1, k), label="m") for k in ks]
    seeds = tuple(draw(st.lists(st.integers(0, 2**16), min_size=batch, max_size=batch), label="seeds"))
    params = dict(draw(record.params(batch, vocab), label="params"))
    rows = [record.boundary(k, m) for k, m in zip(ks, ms)]
    for name in rows[0]:
        params[name] = np.asarray([r[name] for r in rows], dtype=np.asarray(params[name]).dtype)
    logits = np.stack([masked_uniform(vocab, k, s, dtype) for k, s in zip(ks, seeds)])
    return Case(f"masked_uniform(k={ks})", vocab, dtype, seeds, params, logits)
