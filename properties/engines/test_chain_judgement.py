"""The whole-chain judgement judged (``chains_whole.violation`` and ``attribution``), on rows built
by hand: tie freedom is carried between stages, one tied token too many is still caught and
blamed on the stage that kept it, and attribution names the order it was handed.

The nightly false alarm this file pins: a plateaus row (V = 8, p = 0.95, m = 0) where top_p keeps
7 of 8 tokens and the 7th may be any of 4 tied ids; the stage paths carried only the lowest-id
choice, and an engine that kept another tied id was blamed on min_p, a no-op at m = 0.
"""
from __future__ import annotations

import gpu_impl
import gpu_impl.engines
import numpy as np
from hypothesis import given, strategies as st

from properties.engines.attribution import CORRECT, MOVES, explaining
from properties.engines.chain_cases import NONE, ChainCase, chain_args, interacting_chain_cases
from properties.engines.chains_whole import ChainParams, stage_row, violation
from properties.samplers.strategies import Case
from properties.ties import logit_classes, relabel

PLATEAU = np.array([3.0, 2.5, 2.0, 1.5, 1.0, 1.0, 1.0, 1.0])  # masses 0.37 .. 0.95 .. 1: top_p 0.95 keeps 7
PLATEAU_CHAIN = ChainParams(NONE, 0, 1.0, 0.0, 0.0, 0, 0.95, 0.0, 1.0)


def _dropping(*ids: int) -> np.ndarray:
    out = PLATEAU.astype(np.float32)
    out[list(ids)] = -np.inf
    return out


def test_any_tied_choice_at_top_p_passes_the_chain():
    for dropped in (4, 5, 6, 7):
        assert violation(_dropping(dropped), PLATEAU, PLATEAU_CHAIN) is None, f"dropping tied id {dropped}"


def test_one_tied_token_too_many_is_blamed_on_top_p():
    why = violation(_dropping(), PLATEAU, PLATEAU_CHAIN)
    assert why is not None and why.startswith("stage 3 (top_p) drops 1 token"), why


def test_one_tied_token_too_few_fails():
    assert violation(_dropping(6, 7), PLATEAU, PLATEAU_CHAIN) is not None


def test_a_tie_made_by_float32_penalties_is_a_tie():
    """Real llama.cpp's chain on a near_ties row: 2l - 0.5 for logits one ulp apart (tokens 2
    and 4) are distinct in float64 and one value in float32, so top_p may keep either; llama.cpp
    keeps 4, gpu_impl keeps 2, and both pass."""
    cc = ChainCase(Case("near_ties", 8, "float32", (2892,)),
                   ChainParams(np.array([6, 4, 2, 1]), 64, 2.0, 0.0, 0.5, 8, 0.8152835965156555, 0.0, 0.25))
    row64 = cc.row.astype(np.float64)
    ours = np.asarray(gpu_impl.engines.llama_cpp_chain(*chain_args(cc)))[0]
    assert np.isfinite(ours[2]) and not np.isfinite(ours[4])
    theirs = ours.copy()
    theirs[[2, 4]] = ours[[4, 2]]
    assert violation(ours, row64, cc.chain) is None
    assert violation(theirs, row64, cc.chain) is None


@given(cc=interacting_chain_cases(), perm_seed=st.integers(0, 2**16))
def test_relabelling_ties_never_changes_the_verdict(cc, perm_seed):
    """The correct chain's row, and a moved-stage chain's row, each with its ids permuted inside
    the classes of equal post-penalty logits: the verdict is the unpermuted row's."""
    row64, cp = cc.row.astype(np.float64), cc.chain
    classes = logit_classes(stage_row("penalties", row64, cp.stage("penalties")))
    perm = relabel(classes, np.random.default_rng(perm_seed))
    for run in (CORRECT, MOVES[0].run, MOVES[2].run):
        out = run(row64, cp).astype(np.float32)
        moved = np.empty_like(out)
        moved[perm] = out
        assert (violation(out, row64, cp) is None) == (violation(moved, row64, cp) is None)


def test_attribution_names_temperature_first():
    """The issue's own words: an engine running temperature before top_k "behaves like temp
    before top_k" (top_k commutes with temperature, so "temp before top_p" explains it too)."""
    row = np.log(np.arange(64, 0, -1, dtype=np.float64)) * 1.5
    cp = ChainParams(NONE, 0, 1.0, 0.0, 0.0, 20, 0.6, 0.0, 0.25)
    first = next(m for m in MOVES if m.says == "temp before top_k")
    out = first.run(row, cp).astype(np.float32)
    assert violation(out, row, cp) is not None
    assert "temp before top_k" in explaining(out, row, cp)
