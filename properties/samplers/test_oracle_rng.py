"""The oracle's ``Mt19937`` is ``std::mt19937``: the C++ standard's own check value, draws in
any block sizes equal one long draw, and a copy (the peer judge copies every sampler before each
step) continues from its position without moving the original."""
from __future__ import annotations

import copy

import numpy as np
from hypothesis import given, strategies as st

from oracle.rng import Mt19937


def test_the_10000th_output_of_the_default_seed_is_the_standards():
    # [rand.predef]: "the 10000th consecutive invocation of a default-constructed object of type
    # mt19937 shall produce the value 4123659995"
    m = Mt19937(5489)
    m.raw(9999)
    assert int(m.raw(1)[0]) == 4123659995


@given(seed=st.integers(0, 2**32 - 1), sizes=st.lists(st.integers(1, 700), min_size=1, max_size=12),
       copy_after=st.integers(0, 11))
def test_blocks_and_copies_follow_one_stream(seed, sizes, copy_after):
    whole = Mt19937(seed).raw(sum(sizes) + 5)
    m, at, twin, twin_at = Mt19937(seed), 0, None, 0
    for i, n in enumerate(sizes):
        assert np.array_equal(m.raw(n), whole[at:at + n])
        at += n
        if i == copy_after:
            twin, twin_at = copy.deepcopy(m), at
    if twin is not None:
        assert np.array_equal(twin.raw(5), whole[twin_at:twin_at + 5])
        assert np.array_equal(m.raw(5), whole[at:at + 5])  # the copy's draws did not move it
