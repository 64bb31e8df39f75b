"""llama.cpp itself judged as an engine, through the protocol: ``examples/llama_cpp/harness.py``
(libllama's samplers on ``llama_token_data_array``, a real ``llama_sampler_chain``, its generator
driven to the judge's uniforms) judged on the samplers and chains areas, as
``logitcheck judge --impl "exec:python examples/llama_cpp/harness.py" --area samplers --area chains``
runs them. Every failure must be a ledger finding, filed by id from the failing case's data
(``filed_as_findings``): 0 false alarms of the judge, and llama.cpp's real defects reported as
what they are."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from properties.peers.llama_cpp import adapter as peer

_REASON = peer.available()
if _REASON is not None:
    pytest.skip(_REASON, allow_module_level=True)

from oracle.rng import Mt19937  # noqa: E402
from oracle.samplers.selection import select_inverse_cdf  # noqa: E402
from properties.failure import Failure  # noqa: E402
from properties.peers.llama_cpp.filed_as_findings import FILED_OUT, explain  # noqa: E402
from properties.peers.llama_cpp.findings import BEHAVIOUR, LEDGER  # noqa: E402
from properties.protocol.harness import exec_module  # noqa: E402
from properties.samplers.strategies import Case  # noqa: E402

pytestmark = pytest.mark.peer
ROOT = peer._REPO_ROOT
COMMAND = f"{sys.executable} {ROOT / 'examples/llama_cpp/harness.py'}"


@pytest.fixture(scope="module")
def harness():
    mod = exec_module(COMMAND)
    yield mod
    mod.HARNESS.close()


def test_driven_uniforms_are_llama_cpp_own_stream(harness):
    """The harness's driven draws are the draws llama.cpp's own seeded dist makes: the oracle's
    Mt19937 gives seed 7's uniforms, the harness is driven to them, and llama.cpp's dist(7),
    left to its generator, picks the same tokens on the same rows."""
    rows = np.random.default_rng(3).normal(0, 2, (40, 50)).astype(np.float32)
    rng = Mt19937(7)
    u = np.array([rng.uniform_double() for _ in range(len(rows))])
    driven = np.asarray(harness.dist(rows, u))
    assert harness.HARNESS.version == 2  # it speaks the protocol's current version (call ids echoed)
    with peer.dist(7) as own:
        undriven = [own.sample(r) for r in rows]
    assert driven.tolist() == undriven
    assert driven.tolist() == [select_inverse_cdf(r.astype(np.float64), x) for r, x in zip(rows, u)]


def test_filing_reads_the_case_not_the_message():
    """A dist failure at u = 0 on a row whose first token weighs 0 is filed as the ledger's
    finding from the case's arrays; the same words on an innocent case file nothing."""
    row = np.array([[-1000.0, 0.0, 0.0]], dtype=np.float32)
    hit = Case("given", 3, "float32", (0,), {"u": np.array([0.0])}, row)
    miss = Case("given", 3, "float32", (0,), {"u": np.array([0.5])}, row)
    why = "selected 0, legal tokens [1]"
    assert explain(Failure(why, property="impl≡oracle selection", record="dist", case=hit, row=0)) == \
        ["dist-zero-uniform-zero-weight"]
    assert explain(Failure(why, property="impl≡oracle selection", record="dist", case=miss, row=0)) == []


def test_each_filing_rule_holds_on_its_own_witness_only():
    """Every ledger entry with a ``shows_on`` rule holds on its own witness row as the harness
    sees it (a -inf entry is no candidate there, so an underflowing logit stands in for it) and on
    no ordinary row of the same size."""
    filed = [f for f in LEDGER.values() if f.shows_on is not None]
    assert {f.id for f in filed} >= {"bucket-sort-int-overflow", "top-n-sigma-variance-overflow", "typical-nan-entropy",
                                     "typical-nan-entropy-scrambled", "dist-zero-uniform-zero-weight"}
    for f in filed:
        if f.call is None:
            continue
        (name, params), = f.call.steps
        row = np.where(np.isfinite(f.call.values()), f.call.values(), -200.0).astype(np.float32)
        assert f.shows_on(name, row, params), f.id
        ordinary = np.linspace(2, -2, row.size).astype(np.float32)
        assert not f.shows_on(name, ordinary, params), f.id


def _judge(tmp_path, areas: list[str], profile: str = "ci", seed: int = 0) -> tuple[list[dict], str]:
    """``logitcheck judge`` itself, with the filing plugin loaded through PYTEST_PLUGINS."""
    out = tmp_path / "filed.jsonl"
    env = {**os.environ, FILED_OUT: str(out), "PYTEST_PLUGINS": "properties.peers.llama_cpp.filed_as_findings"}
    workers = "2" if (os.cpu_count() or 1) > 1 else "0"  # one harness process per worker
    cmd = [sys.executable, "-m", "reports.cli", "judge", "--impl", f"exec:{COMMAND}", "--profile", profile,
           "--seed", str(seed), "-n", workers] + [a for area in areas for a in ("--area", area)]
    run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)
    text = run.stdout + run.stderr
    lines = [json.loads(x) for x in out.read_text().splitlines()] if out.exists() else []
    assert lines, f"nothing was judged:\n{text[-3000:]}"
    return lines, text


def test_llama_cpp_through_the_protocol_has_no_false_alarm(tmp_path):
    """samplers and chains at ci: every failure is a llama.cpp behaviour of the ledger, by id."""
    lines, text = _judge(tmp_path, ["samplers", "chains"])
    failed = [f"{x['nodeid']}: {x['property']}" for x in lines if x["outcome"] == "failed"]
    assert not failed, "judge failures on llama.cpp that no ledger finding explains:\n" + "\n".join(failed) + \
        "\n" + text[-3000:]
    filed = sorted({fid for x in lines for fid in x["findings"]})
    assert all(LEDGER[fid].kind == BEHAVIOUR for fid in filed), filed
    print(f"judged {len(lines)} tests; filed as findings: "
          f"{[(x['nodeid'], x['findings']) for x in lines if x['findings']]}")
    assert sum(x["outcome"] == "passed" for x in lines) > 100, text[-3000:]
