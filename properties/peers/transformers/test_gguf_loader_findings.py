"""The transformers entries of the findings ledger (``engine="transformers"``: fields its GGUF loader
drops), replayed on the pinned release through ``properties/peers/transformers/findings.py``: a
release that reads the key (or an oracle that changes) fails here, naming the entry."""
from __future__ import annotations

import pytest

from properties.peers.llama_cpp.findings import FINDINGS
from properties.peers.transformers import findings as hf_findings

pytestmark = [pytest.mark.peer]


@pytest.fixture(scope="module", autouse=True)
def _peer() -> None:
    """Imported when the first test runs, not at collection (torch and transformers take seconds)."""
    try:
        hf_findings.peer()
    except ImportError as exc:  # its message names what to install
        pytest.skip(str(exc))


@pytest.mark.parametrize("finding", [f for f in FINDINGS if f.engine == "transformers"], ids=lambda f: f.id)
def test_transformers_finding_still_reproduces(finding):
    """Each transformers ledger entry still occurs on the pinned release (an upstream fix fails here)."""
    got, want = finding.replay()
    assert got == finding.llama_output, f"transformers now gives {got}, recorded {finding.llama_output}"
    assert want == finding.oracle_output, f"the reference now gives {want}, recorded {finding.oracle_output}"
