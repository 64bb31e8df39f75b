"""Meta: the engine author's path. ``--function`` selects exactly the tests that call a function
(from data: properties/calls.py); the end of a run is a verdict per function, failures grouped by
cause with WHY, case and rerun once, NOT COVERED collapsed; progress lines per area; the printed
rerun command works from a tool install in a fresh virtual environment, with no unknown-marker
warnings; the documented install form works with the pip a venv ships; a module that shadows
one of the installed top-level packages stops every entry point with one clear message."""
from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from properties import calls, verdict
from properties.packages import PACKAGES, checkout_env, shadowed
from properties.verdict import Row
from reports import judge_cli
from reports.progress import Progress

ROOT = Path(__file__).resolve().parents[2]
ENV = checkout_env()


# --- grouping and the per-function verdict (no run) ----------------------------------------------

def _failed(nodeid: str, prop: str, dtype: str, case: str, called: tuple = ("min_p",), record: str = "min_p") -> Row:
    f = {"property": prop, "record": record, "dtype": dtype, "case": case, "why": f"why of {nodeid}",
         "category": "exact", "rerun": f"logitcheck rerun {nodeid}"}
    return Row(nodeid, "failed", "samplers", called, False, f, "", calls.blamed(called, record))


def test_one_bug_at_three_dtypes_is_one_group_shown_once_with_its_smallest_case():
    rows = [_failed(f"t.py::test[min_p-{d}]", f"impl≡oracle survivors[min_p] row {i}", d, "C" * (10 - i))
            for i, d in enumerate(("float32", "float16", "bfloat16"))]
    rows.append(_failed("t.py::test_monotone[min_p]", "monotone[min_p]", "float32", "M"))
    rows.append(_failed("t.py::test[top_k-float32]", "impl≡oracle survivors[top_k]", "float32", "K",
                        ("top_k",), "top_k"))
    gs = verdict.groups(rows)
    assert [len(g.rows) for g in gs] == [3, 1, 1]
    text = "\n".join(verdict.failure_lines(rows))
    assert text.count("  WHY ") == 3 and text.count("  rerun ") == 3
    # the group's shown member is the one with the smallest case (row 2: "C" * 8), named once
    assert "why of t.py::test[min_p-bfloat16]" in text and "why of t.py::test[min_p-float32]" not in text
    assert "min_p × impl≡oracle survivors[min_p] (exact): 3 failed tests, at bfloat16, float16, float32" in text
    assert "also  t.py::test[min_p-float16], t.py::test[min_p-float32]" in text


def test_plain_failures_group_by_the_function_named_and_the_message_without_numbers():
    def row(nodeid: str, called: tuple, msg: str) -> Row:
        return Row(nodeid, "failed", "samplers", called, crash=msg, blamed=calls.blamed(called, "", msg))

    step = "AssertionError: chain [top_p{{'p': {p}}}]: step 1 top_p{{'p': {p}}}: kept 1 token(s) the oracle may not keep"
    split = "AssertionError: split 2: step 2 top_p{'p': 0.0}: kept 1 token(s) the oracle may not keep (of top_k, min_p)"
    rows = [row("m.py::test_chain", ("top_k", "top_p", "min_p"), step.format(p=0.5)),
            row("m.py::test_filter[top_p]", ("top_p",), step.format(p=0.9)),
            row("s.py::test_split[default]", ("top_k", "top_p", "min_p"), split.replace(" (of top_k, min_p)", "")),
            row("c.py::test_a", ("engines.llama_cpp_chain",), "AssertionError: kept 3 tokens"),
            row("c.py::test_b", ("engines.llama_cpp_chain",), "AssertionError: kept 17 tokens"),
            row("c.py::test_c", ("engines.llama_cpp_chain",), "ValueError: bad shape")]
    gs = verdict.groups(rows)
    assert [(g.key[0], len(g.rows)) for g in gs] == [("top_p", 3), ("engines.llama_cpp_chain", 2),
                                                     ("engines.llama_cpp_chain", 1)]
    fns = verdict.per_function(rows)
    assert (fns["top_p"].failed, fns["top_k"].failed, fns["min_p"].failed) == (3, 0, 0)


def test_a_failure_counts_against_the_function_its_record_names():
    """A top_p property calls softmax too; its failure is top_p's, softmax is not failed by it."""
    rows = [_failed("t.py::a", "impl≡oracle probabilities[top_p]", "float32", "c", ("softmax", "top_p"), "top_p"),
            Row("t.py::b", "passed", "samplers", ("softmax",))]
    fns = verdict.per_function(rows)
    assert (fns["top_p"].failed, fns["softmax"].failed, fns["softmax"].passed) == (1, 0, 1)


def test_not_covered_collapses_to_the_functions_lacked_in_the_areas_answered():
    rows = [Row("s::a", "passed", "samplers", ("top_p",)), Row("s::b", "skipped", "samplers", ("xtc",), True),
            Row("o::a", "passed", "ops", ("ops.softmax",)), Row("o::b", "skipped", "ops", ("ops.rope",), True)]
    rows += [Row(f"q::{i}", "skipped", "quants", ("quants.matvec",), True) for i in range(40)]
    short = verdict.function_lines(rows)
    assert any("NOT COVERED in the areas it answers (ops, samplers): ops.rope, xtc" in x for x in short)
    assert any("not answered at all: quants (40 NOT COVERED tests; --all-not-covered lists them)" in x for x in short)
    assert not any("quants.matvec" in x for x in short) and len(short) <= 5
    full = verdict.function_lines(rows, everything=True)
    assert any("NOT COVERED, quants: quants.matvec" in x for x in full)
    assert verdict.function_lines(rows, only=frozenset({"top_p"})) == [
        f"  top_p  {verdict.Tally(passed=1).text()}"]


# --- names and selection ------------------------------------------------------------------------

def test_function_names_resolve_as_signatures_prints_them():
    assert calls.resolve(["top_p", "rms_norm", "ops.softmax", "softmax"]) == \
        (frozenset({"top_p", "ops.rms_norm", "ops.softmax", "softmax"}), [])
    chosen, problems = calls.resolve(["top_pp"])
    assert not chosen and problems[0].startswith("--function top_pp: not a function of the judged API (did you mean top_p")


COLLECT = textwrap.dedent('''
    import json, sys, pytest
    from properties import calls
    from properties.plugin import area_of, judges_impl
    seen = {}
    class Map:
        def pytest_collection_modifyitems(self, items):
            seen.update({i.nodeid: [area_of(i.nodeid), sorted(calls.functions_of(i) or ())]
                         for i in items if judges_impl(i)})
    class Names:
        def pytest_collection_finish(self, session):
            seen["--function"] = [i.nodeid for i in session.items]
    args = ["-p", "properties.plugin", "-p", "no:cacheprovider", "-q", "--collect-only", "--rootdir", sys.argv[1]]
    pytest.main([sys.argv[1] + "/properties", *args], plugins=[Map()])
    pytest.main([sys.argv[1] + "/properties", *args, "--function", "top_p", "--function", "ops.rms_norm"],
                plugins=[Names()])
    print("MAP" + json.dumps(seen))
''')


@pytest.fixture(scope="module")
def collected() -> dict:
    proc = subprocess.run([sys.executable, "-c", COLLECT, str(ROOT)], cwd=ROOT, env=ENV, capture_output=True,
                          text=True, timeout=300)
    line = next((x for x in proc.stdout.splitlines() if x.startswith("MAP")), None)
    assert line is not None, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(line[3:])


def test_every_judged_test_says_which_functions_it_calls(collected):
    silent = sorted(n for n, v in collected.items() if n != "--function" and not v[1])
    assert silent == [], f"judged tests that say no function they call (properties/calls.py): {silent}"


def test_judged_tests_live_only_in_the_rooms_the_judge_collects(collected):
    """``logitcheck judge`` collects only the rooms of its areas (faster): nothing judged is lost."""
    rooms = {judge_cli.room_of(a) for a in judge_cli.AREAS}
    outside = sorted(n for n in collected if n != "--function" and n.split("/")[1] not in rooms)
    assert outside == []


def test_function_selects_exactly_the_tests_that_call_it(collected):
    chosen = collected["--function"]
    want = sorted(n for n, v in collected.items() if n != "--function" and {"top_p", "ops.rms_norm"} & set(v[1]))
    assert sorted(chosen) == want
    assert "properties/samplers/test_impl_vs_oracle.py::test_impl_matches_oracle[top_p-float32]" in chosen
    assert "properties/samplers/test_bad_input.py::test_same_decision[softmax-path subnormal logits]" in chosen
    assert "properties/ops/test_bad_input.py::test_bad_input_same_decision[rms_norm eps<0]" in chosen
    assert not any("[top_k-" in n or "softmax NaN row" in n for n in chosen)


# --- both ways, with a founding bug of the C reference harness -----------------------------------

def _judge(impl: str, *extra: str, cwd: Path = ROOT, exe: str = sys.executable, env: dict = ENV) -> subprocess.CompletedProcess:
    return subprocess.run([exe, "-m", "reports.cli", "judge", "--impl", impl, "-n", "0", *extra], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.skipif(shutil.which("make") is None or shutil.which("gcc") is None or not (ROOT / "examples/c").is_dir(),
                    reason="needs make, gcc and the checkout's examples/c")
def test_function_fails_the_buggy_function_and_passes_the_others():
    """top_p accumulating logits (a founding bug): --function top_p fails it, top_k passes."""
    subprocess.run(["make", "-s", "-C", str(ROOT / "examples/c"), "BUG=top_p_on_logits"], check=True, timeout=120)
    proc = _judge(f"exec:{ROOT / 'examples/c/build/harness-top_p_on_logits'}", "--function", "top_p",
                  "--function", "top_k", "-k", "test_impl_matches_oracle and float32")
    out = proc.stdout
    assert proc.returncode == 1, out[-3000:] + proc.stderr[-2000:]
    assert re.search(r"^  top_p\s+FAIL\s+\d+ passed, \d+ FAILED$", out, re.M), out[-3000:]
    assert re.search(r"^  top_k\s+pass\s+\d+ passed$", out, re.M), out[-3000:]
    assert "logit_bias" not in out.split("per function:")[1]


# --- a tool install in a fresh venv: the printed rerun command, no marker warnings ---------------

FAULTY = "{python} -m properties.protocol.testing.pyharness --functions top_p,top_k --on top_p --fault nan"


@pytest.fixture(scope="module")
def venv(tmp_path_factory) -> Path:
    """logitcheck installed (not editable) into a venv that sees this environment's packages."""
    where = tmp_path_factory.mktemp("venv") / "v"
    t0 = time.monotonic()
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(where)], check=True, timeout=120)
    pip = subprocess.run([str(where / "bin/python"), "-m", "pip", "install", "-q", "--no-deps", str(ROOT)],
                         capture_output=True, text=True, timeout=300)
    if pip.returncode != 0:
        pytest.skip(f"pip could not build logitcheck here (no index for setuptools?): {pip.stderr[-500:]}")
    print(f"venv and tool install: {time.monotonic() - t0:.1f} s")
    return where


def test_printed_rerun_command_works_from_a_tool_install(venv, tmp_path):
    python, clean = venv / "bin/python", {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    clean["PATH"] = f"{venv / 'bin'}{os.pathsep}{clean.get('PATH', '')}"
    where = subprocess.run([str(python), "-c", "import properties; print(properties.__file__)"], cwd=tmp_path,
                           env=clean, capture_output=True, text=True, timeout=60).stdout
    assert str(venv) in where, where  # the installed copy, not the checkout
    impl = FAULTY.format(python=python)
    proc = subprocess.run([str(venv / "bin/logitcheck"), "judge", "--impl", impl, "-n", "0", "--function", "top_p",
                           "-k", "test_impl_matches_oracle and float32"], cwd=tmp_path, env=clean,
                          capture_output=True, text=True, timeout=300)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out[-3000:]
    assert "PytestUnknownMarkWarning" not in out and "Unknown pytest.mark" not in out
    rerun = next(x for x in proc.stdout.splitlines() if x.startswith("  rerun "))[len("  rerun "):]
    assert rerun.startswith("logitcheck rerun 'properties/samplers/test_")
    assert shlex.split(rerun)[-1] == impl  # the exec command arrives whole, spaces and all
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    again = subprocess.run(rerun, shell=True, cwd=elsewhere, env=clean, capture_output=True, text=True, timeout=300)
    assert again.returncode == 1 and "1 failed" in again.stdout, again.stdout[-3000:] + again.stderr[-2000:]
    assert "top_p  FAIL" in again.stdout and "PytestUnknownMarkWarning" not in again.stdout + again.stderr


def test_rerun_command_quotes_every_argument_and_names_the_package_test():
    class Config:
        rootpath = ROOT
        invocation_params = type("P", (), {"args": ()})()

        def getoption(self, name, default=None):
            return {"--impl": "exec:./h --x 'y'", "--backend": "numpy", "hypothesis_seed": None,
                    "--contract": "strict"}.get(name, default)

    cmd = __import__("properties.recording", fromlist=["x"]).rerun_command(
        Config(), "properties/samplers/test_x.py::test[top_p-float32]")
    argv = shlex.split(cmd)
    assert argv[:3] == ["logitcheck", "rerun", "properties/samplers/test_x.py::test[top_p-float32]"]
    assert argv[argv.index("--impl") + 1] == "exec:./h --x 'y'" and argv[-2:] == ["--contract", "strict"]


# --- install form, package names -----------------------------------------------------------------

@pytest.mark.skipif(shutil.which("git") is None or not (ROOT / ".git").exists(), reason="needs git and the checkout")
def test_documented_install_form_works_with_the_pip_a_venv_ships(tmp_path):
    """docs/judge-your-engine.md: ``pip install "git+URL"`` (the ``name @ git+file://`` form is
    rejected by pip 23.0 and 23.2, measured)."""
    subprocess.run([sys.executable, "-m", "venv", str(tmp_path / "v")], check=True, timeout=120)
    pip = [str(tmp_path / "v/bin/python"), "-m", "pip"]
    proc = subprocess.run([*pip, "install", "-q", "--no-deps", f"git+file://{ROOT}"], capture_output=True,
                          text=True, timeout=300)
    if proc.returncode != 0 and "setuptools" in proc.stderr and "No matching distribution" in proc.stderr:
        pytest.skip("no package index to build from")
    assert proc.returncode == 0, proc.stderr[-2000:]
    shown = subprocess.run([*pip, "show", "logitcheck"], capture_output=True, text=True, timeout=60).stdout
    assert "Name: logitcheck" in shown
    assert (tmp_path / "v/bin/logitcheck").exists()


def test_packages_are_those_the_distribution_installs():
    text = (ROOT / "pyproject.toml").read_text()
    include = re.search(r"include = \[(.*?)\]", text).group(1)
    assert sorted(re.findall(r'"(\w+)\*"', include)) == sorted(PACKAGES)
    assert shadowed() == []


def test_a_module_shadowing_an_installed_package_stops_with_one_clear_message(tmp_path):
    (tmp_path / "fixtures").mkdir()
    (tmp_path / "fixtures/__init__.py").write_text("")
    for argv in ([sys.executable, "-m", "reports.cli", "signatures"],
                 [sys.executable, "-m", "pytest", "-p", "properties.plugin", "--collect-only", "-q"]):
        proc = subprocess.run(argv, cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=120)
        out = proc.stdout + proc.stderr
        assert proc.returncode != 0 and f"the module 'fixtures' at {tmp_path / 'fixtures'} shadows logitcheck's " \
            "package 'fixtures'" in out, out[-2000:]
        assert "Traceback" not in out


# --- progress ----------------------------------------------------------------------------------

class _Report:
    def __init__(self, nodeid: str, outcome: str, when: str = "call", reason: str = "") -> None:
        self.nodeid, self.outcome, self.when = nodeid, outcome, when
        self.failed, self.skipped = outcome == "failed", outcome == "skipped"
        self.longrepr = ("f", 1, reason) if reason else None


def test_progress_writes_an_area_line_when_its_last_test_finishes():
    lines: list[str] = []
    p = Progress(every=1e9, areas=lambda n: n.split("/")[0])
    p.reporter = type("R", (), {"write_line": lambda self, text: lines.append(text)})()
    p.pytest_xdist_node_collection_finished(None, ["ops/a", "samplers/a", "samplers/b", "samplers/c"])
    p.pytest_runtest_logreport(_Report("samplers/a", "passed"))
    assert p.line(time.monotonic()).endswith(" · ops 0/1, samplers 1/3")  # the periodic line names running areas
    for r in (_Report("ops/a", "skipped", "setup", "NOT COVERED: no ops module"), _Report("samplers/b", "failed"),
              _Report("samplers/c", "passed")):
        p.pytest_runtest_logreport(r)
    assert [x.split(" (")[0] for x in lines] == ["[logitcheck] ops done: 1 tests, 1 NOT COVERED",
                                                 "[logitcheck] samplers done: 3 tests, 2 passed, 1 FAILED"]


def test_rerun_anchors_a_relative_harness_path(tmp_path, monkeypatch):
    """``exec:./build/harness`` printed as given would only rerun from the directory the judge ran in."""
    from properties.recording import anchored

    (tmp_path / "build").mkdir()
    (tmp_path / "build/harness").write_text("")
    monkeypatch.chdir(tmp_path)
    assert anchored("exec:./build/harness --no-claim 'a b'") == f"exec:{tmp_path}/build/harness --no-claim 'a b'"
    assert anchored("exec:python -m h") == "exec:python -m h" and anchored("mypkg.samplers") == "mypkg.samplers"


def test_every_legal_edge_case_is_listed_in_the_engine_authors_doc():
    """The rows of test_bad_input's CASES marked "ok" (read from its source: a test module is
    never imported), each named in docs/judge-your-engine.md."""
    import ast

    tree = ast.parse((ROOT / "properties/samplers/test_bad_input.py").read_text())
    table = next(n.value for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", "") == "CASES")
    ok = [row.elts[0].value for row in table.elts if isinstance(row.elts[-1], ast.Constant) and row.elts[-1].value == "ok"]
    doc = (ROOT / "docs/judge-your-engine.md").read_text()
    assert "softmax-path subnormal logits" in ok and [n for n in ok if f"`{n}`" not in doc] == []


def test_the_plugin_registers_every_marker_the_suite_uses(tmp_path):
    """A run of the installed suite reads no pyproject.toml: the plugin itself must register the
    markers, or each use warns ("Unknown pytest.mark.peer", 17 per run measured before)."""
    proc = subprocess.run([sys.executable, "-m", "pytest", "--markers", "-p", "properties.plugin", "-o", "addopts=",
                           "-p", "no:cacheprovider"], cwd=tmp_path, env=ENV, capture_output=True, text=True, timeout=120)
    registered = set(re.findall(r"^@pytest\.mark\.(\w+)", proc.stdout, re.M))
    used = set()
    for path in (ROOT / "properties").rglob("*.py"):
        used |= set(re.findall(r"pytest\.mark\.(\w+)", path.read_text(encoding="utf-8")))
    builtin = {"parametrize", "skip", "skipif", "xfail", "usefixtures", "filterwarnings"}
    assert {"peer", "slow", "benchmark", "calls"} <= registered
    assert sorted(used - registered - builtin) == []


def test_a_child_python_keeps_the_callers_path(monkeypatch):
    """The device image has no package index: gguf is unpacked to a folder on PYTHONPATH. A child
    run that replaced PYTHONPATH with the checkout lost it (the judge's subprocess failed to import
    gguf on an H100); the checkout goes first and the caller's entries stay."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(["/tmp/site", "/opt/x"]))
    env = checkout_env(EXTRA="1")
    assert env["PYTHONPATH"].split(os.pathsep) == [str(ROOT), "/tmp/site", "/opt/x"] and env["EXTRA"] == "1"
    monkeypatch.delenv("PYTHONPATH")
    assert checkout_env()["PYTHONPATH"] == str(ROOT)
