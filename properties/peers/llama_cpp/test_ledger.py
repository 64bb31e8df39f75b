"""The findings ledger as data (nothing here calls llama.cpp): every entry complete, every id
unique and resolvable, an unknown id an error, and the report and the reproducers made from it.
The replays themselves run in ``test_llama_cpp.py::test_finding_still_reproduces`` and
``test_reproducers.py``."""
from __future__ import annotations

import pytest

from properties.peers.llama_cpp import reproducers
from properties.peers.llama_cpp.backend_explain import EXPLANATIONS, explanation_table, kind_of
from properties.peers.llama_cpp.findings import AGREEMENT, BEHAVIOUR, CONVENTION, FINDINGS, LEDGER, LEGAL_TIE, finding


@pytest.mark.parametrize("entry", FINDINGS, ids=lambda f: f.id)
def test_entry_is_complete(entry):
    """Witness in words, expected and observed; a llama.cpp behaviour or agreement also a replay."""
    assert entry.kind in (BEHAVIOUR, AGREEMENT, LEGAL_TIE, CONVENTION)
    assert entry.description and entry.witness and entry.sampler
    if entry.kind != CONVENTION:
        assert entry.replayable, f"{entry.id}: no replay"
        assert entry.llama_output and entry.oracle_output, f"{entry.id}: expected or observed missing"
    if entry.call is not None and entry.call.where == "cpu":
        assert not entry.call.aborts and entry.call.reference == "oracle"


def test_unknown_ids_are_errors():
    with pytest.raises(KeyError, match="no finding 'no-such-finding' in the ledger"):
        finding("no-such-finding")
    with pytest.raises(KeyError):
        kind_of("no-such-finding")
    with pytest.raises(KeyError):
        reproducers.script("no-such-finding")


def test_every_explanation_cites_the_ledger_with_its_waiver():
    for e in EXPLANATIONS:
        assert LEDGER[e.id].waiver, f"{e.id}: cited by the backend judge without a waiver in words"
    assert all(row["why"] for row in explanation_table())


def test_report_and_reproducers_are_made_from_the_ledger():
    from reports.findings import markdown

    text = markdown(FINDINGS)
    assert all(f"### `{f.id}`" in text for f in FINDINGS)
    scripts = {f.id for f in FINDINGS if reproducers.script(f.id)}
    assert scripts == {f.id for f in FINDINGS if f.kind == BEHAVIOUR and f.call is not None}


def test_the_findings_page_is_the_ledger():
    """docs/llama-cpp-findings.md is ``logitcheck findings --markdown``'s output: a finding added,
    changed or retired in the ledger without regenerating the page fails here."""
    from pathlib import Path

    from reports.findings import markdown

    page = Path(__file__).resolve().parents[3] / "docs" / "llama-cpp-findings.md"
    assert page.read_text() == markdown(FINDINGS) + "\n", \
        "docs/llama-cpp-findings.md is stale: logitcheck findings --markdown > docs/llama-cpp-findings.md"
