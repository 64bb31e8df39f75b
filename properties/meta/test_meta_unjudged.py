"""Nothing passes or fails that was not judged: every test that takes the implementation (impl,
oimpl, qimpl: ``--judged-only``) run on a module with no function at all must be NOT COVERED
(0 passed, 0 failed), and on a module whose every function raises must never pass."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _judge(module: str) -> str:
    env = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    workers = ["-p", "xdist.plugin", "-n", "2"] if (os.cpu_count() or 1) > 1 else []
    cmd = [sys.executable, "-m", "pytest", "properties", "-o", "addopts=", "-p", "properties.plugin", "-p", "_hypothesis_pytestplugin",
           *workers, "-q", "-p", "no:cacheprovider", "--hypothesis-profile=smoke", "--judged-only",
           "--impl", module, "-rf"]
    run = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=1200)
    return run.stdout + run.stderr


def _counts(text: str) -> dict[str, int]:
    line = re.search(r"^(\d+) tests judged \S+: (\d+) passed, (\d+) failed, (\d+) NOT COVERED", text, re.M)
    assert line, f"no 'tests judged' line in the output:\n{text[-3000:]}"
    return {"judged": int(line[1]), "passed": int(line[2]), "failed": int(line[3]), "not covered": int(line[4])}


def test_a_module_without_functions_is_never_passed_nor_failed():
    text = _judge("properties.meta.impls.empty")
    c = _counts(text)
    assert c["judged"] > 500 and c["passed"] == 0 and c["failed"] == 0, f"{c}\n{text[-3000:]}"


def test_a_module_that_always_raises_never_passes():
    text = _judge("properties.meta.impls.raising")
    c = _counts(text)
    assert c["judged"] > 500 and c["passed"] == 0, f"{c}\n{text[-3000:]}"
