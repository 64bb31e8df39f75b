"""Property 6: the cross-engine matrix (engine pair × common setting), recorded as data.

A cell passes when it is "same" (no difference found), or "differs" with its witness (and its
largest-TVD case) explained: removing a set of the labelled semantic differences (each engine
run with that one trait toggled) makes the difference vanish. A difference no label removes
fails the cell (a variant bug, an unlabelled engine difference, or a label that is wrong).
Searches are derandomized, so the recorded witnesses repeat. The mapping property is in
``test_translation.py``.
"""
from __future__ import annotations

import pytest
from hypothesis import Phase, find, given, settings, target
from hypothesis.errors import NoSuchExample

from properties import recording
from properties.profiles import WITNESS_SEARCH_PHASES, current_profile
from properties.engines.matrix import (ENGINE_ORDER, PAIRS, REAL, SETTINGS, cases, compare, differs, explanation,
                                      labels, not_expressible, runs, vocab_cap, witness)

# search budgets: CI keeps the whole matrix near a minute; nightly searches ~7x longer
_NIGHTLY = current_profile() == "nightly"
_FIND = settings(max_examples=1000 if _NIGHTLY else 150, derandomize=True, database=None, deadline=None,
                 phases=WITNESS_SEARCH_PHASES)
_CLIMB = settings(max_examples=400 if _NIGHTLY else 40, derandomize=True, database=None, deadline=None,
                  phases=(Phase.generate, Phase.target))
CELLS: dict[str, dict] = {}
TVD_TABLE: dict[str, dict] = {}


def _record(pair, name, cell) -> None:
    CELLS[f"{pair[0]} vs {pair[1]} @ {name}"] = {"a": pair[0], "b": pair[1], "setting": name, **cell}
    TVD_TABLE.setdefault(f"{pair[0]} vs {pair[1]}", {})[name] = (
        cell["relation"] if cell["relation"] != "differs" else round(cell["max_tvd"], 6))
    recording.table("engine_matrix", {"engines": list(ENGINE_ORDER), "settings": {k: repr(v) for k, v in SETTINGS.items()},
                                      "cells": list(CELLS.values()), "real": REAL})
    recording.table("engine_matrix_max_tvd", TVD_TABLE)


def largest_tvd(pair, s, cap) -> tuple[float, tuple | None]:
    best = {"tvd": 0.0, "case": None}

    @_CLIMB
    @given(case=cases(s, cap))
    def climb(case):
        d = compare(pair, s, case).tvd if differs(pair, s, case) else 0.0
        target(d, label="tvd")
        if d > best["tvd"]:
            best.update(tvd=d, case=case)

    climb()
    return best["tvd"], best["case"]


def explained(pair, s, name, case, what: str) -> list:
    """The labels that remove this case's difference; fails the cell when none do."""
    why = labels(pair, s, case)
    w = witness(pair, s, case)
    assert why, (f"{pair[0]} and {pair[1]} differ at {name} with no known reason: unexplained difference.\n"
                 f"{what} {w}")
    needed = explanation(*runs(pair, s, case), case[0], why)
    assert needed is not None, (
        f"{pair[0]} and {pair[1]} differ at {name}; the labels {[str(d) for d in why]} do not explain it: removing "
        f"them all (each engine run with the trait toggled) leaves a difference.\n{what} {w}")
    return needed


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
        found = find(cases(s, cap), lambda c: differs(pair, s, c), settings=_FIND)
    except NoSuchExample:
        predicted = labels(pair, s, ([0.0], (0,), (0,)))
        _record(pair, name, {"relation": "same", "max_tvd": 0.0, "examples": _FIND.max_examples,
                             "note": f"predicted but not found: {[str(d) for d in predicted]}" if predicted else ""})
        return
    w = witness(pair, s, found)
    why = explained(pair, s, name, found, "WITNESS")
    max_tvd, worst = largest_tvd(pair, s, cap)
    worst_why = explained(pair, s, name, worst, "LARGEST-TVD CASE") if worst else []
    _record(pair, name, {"relation": "differs", "intended": True, "why": [str(d) for d in why], "witness": w,
                         "traits": sorted({d.trait for d in why}),
                         "max_tvd": max(max_tvd, w["tvd"]),
                         "max_tvd_why": [str(d) for d in worst_why],
                         "max_tvd_case": {"logits": list(worst[0]), "history": list(worst[1]),
                                          "output": list(worst[2])} if worst else None})
