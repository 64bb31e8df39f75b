"""Property 6: the cross-engine matrix (engine pair × common setting), recorded as data, and the
mapping helpers' exactness property.

A cell passes when it is "same" (no difference found), or "differs" with every witness explained
by a known semantic difference; an unexplained difference fails the cell (a variant bug or an
unlabelled engine difference). Searches are derandomized, so the recorded witnesses repeat.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import Phase, find, given, settings, strategies as st, target
from hypothesis.errors import NoSuchExample

from oracle.engines import ENGINES, Settings
from oracle.engines.mapping import translate, tvd
from properties import recording
from properties.profiles import current_profile
from properties.engines.matrix import (ENGINE_ORDER, PAIRS, SETTINGS, canonical, cases, compare,
                                      exchangeable_classes, labels, not_expressible, vocab_cap, witness)

# search budgets: CI keeps the whole matrix near a minute; nightly searches ~7x longer
_NIGHTLY = current_profile() == "nightly"
_FIND = settings(max_examples=1000 if _NIGHTLY else 150, derandomize=True, database=None, deadline=None)
_CLIMB = settings(max_examples=400 if _NIGHTLY else 40, derandomize=True, database=None, deadline=None,
                  phases=(Phase.generate, Phase.target))
CELLS: dict[str, dict] = {}
TVD_TABLE: dict[str, dict] = {}


def _record(pair, name, cell) -> None:
    CELLS[f"{pair[0]} vs {pair[1]} @ {name}"] = {"a": pair[0], "b": pair[1], "setting": name, **cell}
    TVD_TABLE.setdefault(f"{pair[0]} vs {pair[1]}", {})[name] = (
        cell["relation"] if cell["relation"] != "differs" else round(cell["max_tvd"], 6))
    recording.table("engine_matrix", {"engines": list(ENGINE_ORDER), "settings": {k: repr(v) for k, v in SETTINGS.items()},
                                      "cells": list(CELLS.values())})
    recording.table("engine_matrix_max_tvd", TVD_TABLE)


def largest_tvd(pair, s, cap) -> tuple[float, dict | None]:
    best = {"tvd": 0.0, "case": None}

    @_CLIMB
    @given(case=cases(s, cap))
    def climb(case):
        d = compare(pair, s, case).tvd
        target(d, label="tvd")
        if d > best["tvd"]:
            best.update(tvd=d, case=case)

    climb()
    return best["tvd"], best["case"]


@pytest.mark.parametrize("name", list(SETTINGS))
@pytest.mark.parametrize("pair", PAIRS, ids=lambda p: f"{p[0]}-{p[1]}")
def test_engine_matrix_cell(pair, name):
    s = SETTINGS[name]
    why_not = not_expressible(pair, s)
    if why_not:
        _record(pair, name, {"relation": "n/a", "why": why_not})
        return
    cap = vocab_cap(pair, s)
    try:
        found = find(cases(s, cap), lambda c: compare(pair, s, c).differs, settings=_FIND)
    except NoSuchExample:
        predicted = labels(pair, s, ())
        _record(pair, name, {"relation": "same", "max_tvd": 0.0, "examples": _FIND.max_examples,
                             "note": f"predicted but not found: {predicted}" if predicted else ""})
        return
    w = witness(pair, s, found)
    why = labels(pair, s, found[1])
    assert why, (f"{pair[0]} and {pair[1]} differ at {name} with no known reason: unexplained difference.\n"
                 f"WITNESS {w}")
    max_tvd, worst = largest_tvd(pair, s, cap)
    _record(pair, name, {"relation": "differs", "intended": True, "why": why, "witness": w,
                         "max_tvd": max(max_tvd, w["tvd"]),
                         "max_tvd_case": {"logits": list(worst[0]), "history": list(worst[1])} if worst else None})


MAP_SETTINGS = st.builds(
    Settings, temperature=st.sampled_from([1.0, 0.8, 0.5, 2.0]), top_k=st.sampled_from([0, 2, 5]),
    top_p=st.sampled_from([1.0, 0.9, 0.5]), min_p=st.sampled_from([0.0, 0.05, 0.2]),
    repetition_penalty=st.sampled_from([1.0, 1.1]))


@pytest.mark.parametrize("pair", [(a, b) for a in ENGINE_ORDER for b in ENGINE_ORDER if a != b],
                         ids=lambda p: f"{p[0]}->{p[1]}")
@given(data=st.data())
def test_translation_exact_when_it_says_so(pair, data):
    """Where ``translate`` reports no structural difference and the data caveats hold, the
    target engine with the translated settings samples the source's distribution."""
    src, dst = pair
    s = data.draw(MAP_SETTINGS, label="settings")
    logits = np.asarray(data.draw(st.lists(st.integers(-40, 40).map(lambda i: i / 8), min_size=1, max_size=24),
                                  label="logits"))
    s = s.with_(prompt=tuple(data.draw(st.lists(st.integers(0, logits.size - 1), max_size=90), label="history")))
    if s.active() - set(ENGINES[src].SUPPORTS):
        with pytest.raises(ValueError):
            translate(s, src, dst)
        return
    tr = translate(s, src, dst)
    if not tr.exact or not tr.caveats_hold(logits, s):
        return
    cls = exchangeable_classes(logits, s)  # which of two exchangeable tokens a tie-break drops is unspecified
    d = tvd(canonical(ENGINES[src].distribution(logits, s), cls),
            canonical(ENGINES[dst].distribution(logits, tr.settings), cls))
    assert d <= 1e-9, f"translate({src}->{dst}) claims exactness but TVD = {d:.3g}\nsettings {s}\n" \
                      f"translated {tr.settings}\nlogits {logits.tolist()}"
    recording.note(f"mapping:{src}->{dst}", "exact_translation", "float64")
