"""Property 4: the order matrix. Commuting pairs are proven; non-commuting pairs must produce a
shrunk witness (hypothesis ``find``), and the matrix with its witnesses is recorded as data."""
from __future__ import annotations

import pytest
from hypothesis import find, given, settings, strategies as st

from properties import recording
from properties.profiles import WITNESS_SEARCH_PHASES
from properties.samplers.order import EXPECTED, PAIRS, WHY, distribution, pair_id, params, small_logits, tvd, witness_record

_MATRIX: dict[str, dict] = {}
# derandomized so the recorded witness is the same on every run
_SEARCH = settings(max_examples=1000, derandomize=True, database=None, deadline=None, phases=WITNESS_SEARCH_PHASES)


def _record(pair, relation, witness=None):
    _MATRIX[pair_id(pair)] = {"first": pair[0], "second": pair[1], "relation": relation,
                              "why": WHY.get(frozenset(pair), ""), "witness": witness,
                              "tvd": witness["tvd"] if witness else None}
    recording.table("order_matrix", {"samplers": sorted({p for q in PAIRS for p in q}),
                                     "cells": list(_MATRIX.values())})


@pytest.mark.parametrize("pair", [p for p in PAIRS if EXPECTED[frozenset(p)] == "commute"], ids=pair_id)
@given(data=st.data())
def test_pair_commutes(pair, data):
    logits = data.draw(small_logits(64), label="logits")
    p = data.draw(params(pair, exact_temp=True), label="params")
    a, b = distribution(pair, logits, p), distribution(pair[::-1], logits, p)
    assert (a == b).all(), f"{pair} do not commute here: TVD {tvd(a, b)}"
    _record(pair, "commute")


@pytest.mark.parametrize("pair", [p for p in PAIRS if EXPECTED[frozenset(p)] == "differs"], ids=pair_id)
def test_pair_witness_found(pair):
    def differs(case) -> bool:
        logits, p = case
        return tvd(distribution(pair, logits, p), distribution(pair[::-1], logits, p)) > 1e-9

    logits, p = find(st.tuples(small_logits(), params(pair, exact_temp=False)), differs, settings=_SEARCH)
    witness = witness_record(pair, logits, p)
    assert witness["tvd"] > 1e-9
    _record(pair, "differs", witness)
