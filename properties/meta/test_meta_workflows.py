"""Meta: the CI and nightly workflows parse, run only commands that exist, and run the commands
the README documents (so a reader can run what CI runs)."""
from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from reports.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
yaml = pytest.importorskip("yaml", reason="pyyaml is in the test extra: pip install -e '.[test]'")


def steps(name: str) -> list[tuple[str, dict]]:
    doc = yaml.safe_load((WORKFLOWS / name).read_text())
    return [(job, step) for job, spec in doc["jobs"].items() for step in spec["steps"]]


def commands(name: str) -> list[str]:
    """Every shell command line the workflow runs (continuations joined, ``VAR=$(...)`` lines skipped)."""
    out = []
    for _, step in steps(name):
        for line in str(step.get("run", "")).replace("\\\n", " ").splitlines():
            line = line.strip()
            if line and not re.match(r"^[A-Z_]+=", line):
                out.append(line)
    return out


def readme() -> str:
    return (ROOT / "README.md").read_text()


@pytest.mark.parametrize("name", ["ci.yml", "nightly.yml"])
def test_workflow_parses_and_its_actions_are_pinned(name):
    doc = yaml.safe_load((WORKFLOWS / name).read_text())
    triggers = doc.get("on", doc.get(True))  # YAML 1.1 reads the key `on` as True
    assert triggers and doc["jobs"]
    for job, step in steps(name):
        assert "run" in step or re.fullmatch(r"[\w-]+/[\w/-]+@v\d+", step.get("uses", "")), (job, step)


def test_ci_runs_the_ci_script():
    assert commands("ci.yml") == ["bash .ci/run"]
    script = (ROOT / ".ci" / "run").read_text()
    test_line = next(line for line in readme().splitlines() if line.startswith("python -m pip install")
                     and "pytest" in line)
    assert test_line in script.splitlines(), "the README's test command is .ci/run's"
    assert "apt-get install -y -qq chromium" in script


def test_nightly_has_cpu_and_gpu_jobs_with_database_and_baseline():
    doc = yaml.safe_load((WORKFLOWS / "nightly.yml").read_text())
    assert "schedule" in doc.get("on", doc.get(True))
    assert doc["jobs"]["gpu"]["runs-on"] == ["self-hosted", "gpu"]
    for job in ("cpu", "gpu"):
        uses = [s.get("uses", "") + str(s.get("with", {}).get("path", "")) for j, s in steps("nightly.yml") if j == job]
        assert "actions/cache@v4.hypothesis" in uses and "actions/cache/restore@v4baseline" in uses
        assert any(u.startswith("actions/upload-artifact@v4report/") for u in uses)
    assert any("--backend cupy" in c for c in commands("nightly.yml"))


def test_every_logitcheck_command_parses_and_is_documented():
    """Each `logitcheck ...` line parses with the CLI's own parser and appears in the nightly's page,
    docs/report.md, which the README's Nightly section links."""
    text = (ROOT / "docs" / "report.md").read_text()
    assert "docs/report.md#nightly" in readme()
    lines = [c for c in commands("nightly.yml") if c.startswith("logitcheck")]
    assert len(lines) == 3
    for line in lines:
        expanded = line.replace("$BASELINE", "--baseline baseline/results.json").replace('"$SEED"', "7")
        argv = shlex.split(expanded)
        args = build_parser().parse_args(argv[1:])
        assert args.handler is not None
        if args.command == "report":
            assert args.profile == "nightly" and args.strict and args.workers == "auto"
        assert line in text, f"docs/report.md does not document: {line}"


def test_install_lines_are_the_readmes():
    for line in commands("nightly.yml"):
        if "pip install" in line:
            assert line in readme()
        else:
            exe = shlex.split(line)[0]
            assert exe in ("logitcheck", "mkdir", "cp"), line
    assert (ROOT / ".ci" / "run").stat().st_mode & 0o111, ".ci/run is executable"
