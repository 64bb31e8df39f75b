"""The peers' one kept-set rule (``properties.peers.kept_set``), judged both ways: with every token
its own class it is exactly must ⊆ kept ⊆ may (the samplers' ``describe_set_violation``, an
independent statement of it, agrees on every drawn case); with tie classes a tied swap passes and
one token too many or too few in a class fails; a merged class is free. HF's answers, judged by
the peers' one judge (``Legal``), pass and fail the same way, their probabilities compared only at
the oracle's counts."""
from __future__ import annotations

import numpy as np
from hypothesis import given, strategies as st

from oracle.engines import transformers as o_hf
from properties.peers.kept_set import class_counts, outside_bracket, singletons, tie_classes
from properties.peers.transformers.legality import check_kept, delta_for
from properties.samplers.brackets import describe_set_violation


@st.composite
def bracketed(draw) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    n = draw(st.integers(1, 30))
    must = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    may = must | np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    kept = np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)))
    return kept, must, may


@given(bracketed())
def test_singletons_are_must_within_kept_within_may(case):
    kept, must, may = case
    bad = outside_bracket(kept, must, may, singletons(kept.size))
    assert (not bad) == (describe_set_violation(kept, must, may) is None)
    assert sorted(bad) == np.flatnonzero((must & ~kept) | (kept & ~may)).tolist()


def test_tie_classes_judge_counts_not_tokens():
    key = np.array([2.0, 1.0, 1.0, 1.0, 0.0, -np.inf])
    cls, merged = tie_classes(key, "float64")
    assert cls.tolist() == [2, 1, 1, 1, 0, -1] and not merged.any()
    fewer = np.array([1, 1, 0, 0, 0, 0], dtype=bool)   # one of the three tied tokens ...
    more = np.array([1, 1, 1, 0, 0, 0], dtype=bool)    # ... or two of them
    swapped = np.array([1, 0, 0, 1, 0, 0], dtype=bool)  # another tied token: legal
    assert outside_bracket(swapped, fewer, more, cls) == {}
    dropped_top = np.array([0, 1, 0, 0, 0, 0], dtype=bool)  # the untied top token is not optional
    assert outside_bracket(dropped_top, fewer, more, cls) == {2: (1, 0, 1)}
    three = np.array([1, 1, 1, 1, 0, 0], dtype=bool)
    assert outside_bracket(three, fewer, more, cls) == {1: (1, 3, 2)}
    none = np.array([1, 0, 0, 0, 0, 0], dtype=bool)
    assert outside_bracket(none, fewer, more, cls) == {1: (1, 0, 2)}
    assert class_counts(three, cls).tolist() == [0, 3, 1]


def test_keys_within_rounding_merge_into_a_free_class():
    u = 2.0**-24
    key = np.array([1.0, 1.0 + u, 0.0])
    cls, merged = tie_classes(key, "float32")
    assert cls.tolist() == [1, 1, 0] and merged.tolist() == [False, True]
    both = np.array([1, 1, 0], dtype=bool)
    one = np.array([1, 0, 0], dtype=bool)
    assert outside_bracket(both, one, one, cls) == {1: (1, 2, 1)}
    assert outside_bracket(both, one, one, cls, free=merged) == {}
    assert tie_classes(key, "float64")[0].tolist() == [1, 2, 0]  # float64 tells them apart


def test_hf_answers_judged_by_the_one_judge():
    """Four tied scores at top_p = 0.5: the oracle keeps two (an exact boundary, so in float64,
    δ = 0, the bracket is the oracle's own count; in float32 δ > 0 admits three)."""
    key = np.zeros(4)

    def judge(hf: np.ndarray, dtype: str):
        return check_kept("top_p", dtype, hf, key, lambda p: o_hf.top_p(key, p["p"]), {"p": +1}, {"p": 0.5},
                          delta_for(dtype, key))
    exact = o_hf.top_p(key, 0.5)
    assert np.isfinite(exact).sum() == 2 and judge(exact, "float64").outcome == "identical_sets"
    swapped = exact[::-1].copy()  # the other two tied tokens
    assert judge(swapped, "float64").outcome == "tie_permuted"
    three = np.where(np.arange(4) < 3, 0.0, -np.inf)
    assert "outside the bracket" in judge(three, "float64").why
    assert judge(three, "float32").outcome == "boundary_bracketed"  # another legal count: p not compared
    nudged = swapped.copy()
    nudged[np.flatnonzero(np.isfinite(nudged))[0]] = 1e-3  # p off by 2.5e-4 at the oracle's counts
    assert "sorted p" in judge(nudged, "float32").why
