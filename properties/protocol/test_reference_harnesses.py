"""The reference harnesses (examples/c, examples/rust) built and judged over the protocol, as an
engine author would run them: the correct build judged whole (samplers, ops, the chain) with 0
failures and nothing it implements NOT COVERED; each founding-bug build killed, by name, by the
property that exists for it. Both harnesses are written fresh for this project (standard library
only), so this is also the protocol's end-to-end test in two languages."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[2]
JUDGED = ["properties/samplers", "properties/ops", "properties/engines/test_chains.py"]


@dataclass(frozen=True)
class Reference:
    name: str
    tool: str
    build: Callable[[str | None], list[str]]
    binary: Callable[[str | None], Path]


C = Reference("c", "make", lambda bug: ["make", "-s", "-C", "examples/c"] + ([f"BUG={bug}"] if bug else []),
              lambda bug: ROOT / "examples/c/build" / ("harness" + (f"-{bug}" if bug else "")))
RUST = Reference(
    "rust", "cargo",
    lambda bug: ["cargo", "build", "--release", "--offline", "--quiet", "--manifest-path", "examples/rust/Cargo.toml"]
    + (["--features", f"bug_{bug}", "--target-dir", f"examples/rust/target/bug_{bug}"] if bug else []),
    lambda bug: ROOT / "examples/rust/target" / (f"bug_{bug}/release" if bug else "release") / "logitcheck-harness")
REFERENCES = (C, RUST)

# founding bug -> (the test that kills it, what its failure must say)
KILLS = {
    "top_p_on_logits": ("properties/samplers/test_impl_vs_oracle.py::test_impl_matches_oracle[top_p-float32]",
                        "impl≡oracle survivors[top_p]"),
    "softmax_top1000": ("properties/samplers/test_invariants.py::test_softmax_invariants", "Σp = "),
    "temp_misplaced": ("properties/engines/test_chains.py::test_llama_cpp_chain_follows_the_oracle_chain",
                       "behaves like temp before"),
    "top_p_stale_softmax": ("properties/engines/test_chains.py::test_llama_cpp_chain_follows_the_oracle_chain",
                            "behaves like top_p on a stale softmax"),
    "rope_restart": ("properties/ops/test_ops.py::test_op_property[impl_vs_oracle[rope]-float32]",
                     "impl≡oracle[rope]: output 0: error"),
}


def built(ref: Reference, bug: str | None = None) -> Path:
    if shutil.which(ref.tool) is None:
        pytest.skip(f"{ref.tool} is not installed: the {ref.name} harness cannot be built here")
    run = subprocess.run(ref.build(bug), cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, f"building the {ref.name} harness ({bug or 'correct'}) failed:\n{run.stderr[-3000:]}"
    return ref.binary(bug)


def judge(binary: Path, targets: list[str], parallel: bool = True) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    workers = ["-p", "xdist.plugin", "-n", "2"] if parallel and (os.cpu_count() or 1) > 1 else []
    cmd = [sys.executable, "-m", "pytest", *targets, "-o", "addopts=", "-p", "properties.plugin",
           "-p", "_hypothesis_pytestplugin", *workers, "-q", "-p", "no:cacheprovider", "--hypothesis-profile=ci",
           "--judged-only", "--impl", f"exec:{binary}", "-rf"]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1500)


def handshake_functions(binary: Path) -> set[str]:
    out = subprocess.run([str(binary)], input="LOGITCHECK 2\nQUIT\n", capture_output=True, text=True, timeout=30)
    return {line.split()[1] for line in out.stdout.splitlines() if line.startswith("FUNCTION ")}


@pytest.mark.parametrize("ref", REFERENCES, ids=lambda r: r.name)
def test_reference_harness_speaks_version_2_and_1(ref):
    """Greeted with 2 it echoes each call's id in the answer (OK and ERROR); greeted with 1 it
    answers without ids."""
    binary = built(ref)
    row = b"ARG logits f32 2 1 2\n" + np.array([0.5, 2.0], "<f4").tobytes()
    bad = b"ARG logits f32 2 1 2\n" + np.array([np.nan, 2.0], "<f4").tobytes()
    for greeting, call, ok, err in [(b"LOGITCHECK 2", b"CALL 41 greedy 1\n", b"OK 41 1\n", b"ERROR 42 refused "),
                                    (b"LOGITCHECK 1", b"CALL greedy 1\n", b"OK 1\n", b"ERROR refused ")]:
        second = call.replace(b"41", b"42")
        out = subprocess.run([str(binary)], input=greeting + b"\n" + call + row + second + bad + b"QUIT\n",
                             capture_output=True, timeout=30).stdout
        head, _, answers = out.partition(b"END\n")
        assert head.startswith(greeting + b" "), head[:80]
        assert answers.startswith(ok + b"RESULT i") and err in answers, answers[:200]


@pytest.mark.parametrize("ref", REFERENCES, ids=lambda r: r.name)
def test_reference_harness_is_judged_green(ref):
    binary = built(ref)
    run = judge(binary, JUDGED)
    text = run.stdout + run.stderr
    line = re.search(r"^(\d+) tests judged \S+: (\d+) passed, (\d+) failed, (\d+) NOT COVERED", text, re.M)
    assert line, text[-3000:]
    judged, passed, failed = int(line[1]), int(line[2]), int(line[3])
    assert failed == 0 and run.returncode == 0, text[-4000:]
    assert passed > 100, f"only {passed} of {judged} tests judged the {ref.name} harness"
    listed = handshake_functions(binary)
    # NOT COVERED names; only the cases no harness can be sent (complex logits) may touch a listed function
    lacking = set(re.findall(r"^  exec:\S+?\.(\S+)(?: \(some cases: [^)]*\))?$", text, re.M))
    assert listed and not (lacking & listed), f"NOT COVERED although the harness lists them: {sorted(lacking & listed)}"


@pytest.mark.parametrize("ref", REFERENCES, ids=lambda r: r.name)
@pytest.mark.parametrize("bug", sorted(KILLS))
def test_founding_bug_is_killed_by_its_property(ref, bug):
    target, says = KILLS[bug]
    run = judge(built(ref, bug), [target], parallel=False)
    text = run.stdout + run.stderr
    assert run.returncode == 1 and re.search(r"\b1 failed\b", text), f"{bug} survived {target}:\n{text[-3000:]}"
    assert says in text, f"{bug} failed {target} without naming {says!r}:\n{text[-3000:]}"


def test_judge_runs_from_outside_the_checkout(tmp_path):
    """``logitcheck judge`` from an engine's own directory: the judged tests are found in the
    installed package, whatever the working directory, and areas are still told apart."""
    binary = built(C)
    run = subprocess.run([sys.executable, "-m", "reports.cli", "judge", "--impl", f"exec:{binary}", "--area", "chains",
                          "-n", "0"], cwd=tmp_path, capture_output=True, text=True, timeout=600)
    text = run.stdout + run.stderr
    assert run.returncode == 0, text[-3000:]
    assert re.search(r"^  chains: 2 tests judged exec:\S+: 2 passed, 0 failed, 0 NOT COVERED", text, re.M), text[-3000:]
