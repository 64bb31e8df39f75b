"""The generated reproducers are what they claim: stand-alone scripts that, run with a plain
``python``, show llama.cpp doing exactly what the finding records (or aborting where it aborts).

Every script is compiled in every profile; running one costs ~1.5 s (a fresh interpreter importing
llama_cpp), so ci runs one per kind (CPU sampler, backend chain, backend abort) and nightly all.
"""
from __future__ import annotations

import subprocess
import sys

import pytest

from properties.peers.llama_cpp import adapter as peer
from properties.profiles import current_profile

_REASON = peer.available()
if _REASON is not None and _REASON.startswith("llama_cpp is not importable"):
    pytest.skip(_REASON, allow_module_level=True)

from properties.peers.llama_cpp import reproducers  # noqa: E402
from properties.peers.llama_cpp.findings import FINDINGS  # noqa: E402

pytestmark = pytest.mark.peer
WITH_SCRIPT = [f for f in FINDINGS if reproducers.script(f.id)]
ONE_PER_KIND = {"typical-nan-entropy", "backend-greedy-returns-position", "backend-top-k-above-candidates-aborts"}


def test_every_llama_cpp_behaviour_has_a_reproducer():
    missing = [f.id for f in FINDINGS if f.kind == "llama.cpp behaviour" and f.engine == "llama.cpp"
               and not reproducers.script(f.id)]  # other engines' entries are replayed by their peers' tests
    # the DRY crash needs the C++-only llama_sampler_init_dry_testing, and dist at u = 0 a generator
    # driven through the protocol harness (examples/llama_cpp/harness.py): their replays are the reproducers
    assert missing == ["dist-zero-uniform-zero-weight", "dry-testing-disabled-segfault"], \
        f"findings without a reproducer: {missing}"


@pytest.mark.parametrize("finding", WITH_SCRIPT, ids=lambda f: f.id)
def test_reproducer_compiles(finding):
    compile(reproducers.script(finding.id), f"{finding.id}.py", "exec")


@pytest.mark.parametrize("finding", [f for f in WITH_SCRIPT if current_profile() == "nightly" or f.id in ONE_PER_KIND],
                         ids=lambda f: f.id)
def test_reproducer_shows_the_finding(finding, tmp_path):
    path = tmp_path / f"{finding.id}.py"
    path.write_text(reproducers.script(finding.id))
    proc = subprocess.run([sys.executable, str(path)], cwd=tmp_path, capture_output=True, text=True, timeout=300)
    assert "expected:" in proc.stdout, f"no expected-vs-actual line: {proc.stdout[-500:]} {proc.stderr[-500:]}"
    if finding.call.aborts:
        assert proc.returncode < 0 and finding.llama_output["assert"] in proc.stderr, \
            f"expected an abort with {finding.llama_output['assert']}, got exit {proc.returncode}"
        return
    assert proc.returncode == 0, proc.stderr[-800:]
    raw = reproducers.parse_result(proc.stdout)
    assert reproducers.outcome(finding.id, raw) == finding.llama_output
