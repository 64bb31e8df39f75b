"""pytest plugin: ``--impl MODULE``, ``--backend numpy|cupy``, ``--lc-results PATH``, the header
and the "not covered" summary; the implementation fixtures (``impl``, and its ``ops`` and
``quants`` modules as ``oimpl`` and ``qimpl``) and ``covered()``, which turns a function the
implementation lacks into a visible NOT COVERED skip."""
from __future__ import annotations

import importlib
import json
import os
import platform
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from properties import profiles  # noqa: F401  (registers and loads the hypothesis profiles)
from properties import calls, numerics, recording, verdict
from properties.failure import failure_in
from properties import case_coverage
from properties.backends import BACKENDS, NOT_COVERED, CaseUnsupported, Impl, NotCovered, cupy_device_reason, cupy_or_none, load_impl, part_of


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("logitcheck")
    group.addoption("--impl", default=os.environ.get("LOGITCHECK_IMPL", "gpu_impl"),
                    help="module with gpu_impl's API to judge (default: gpu_impl)")
    group.addoption("--backend", choices=BACKENDS, default=os.environ.get("LOGITCHECK_BACKEND", "numpy"),
                    help="array backend the implementation runs on; emulated: gpu_impl's device path on the CPU, "
                         "its CUDA kernels run from their source by properties/gpu/emulator (no GPU, no CuPy)")
    group.addoption("--lc-results", default=None, help="write measured results (JSON) here")
    group.addoption("--judged-only", action="store_true", default=False,
                    help="run only the tests that take the implementation (impl, oimpl, qimpl): what judges it")
    group.addoption("--area", action="append", default=[], choices=AREAS,
                    help="with --judged-only: only these areas (repeatable)")
    group.addoption("--function", action="append", default=[], metavar="NAME",
                    help="only the tests that take the implementation and call this function (repeatable; "
                         "implies --judged-only; names as `logitcheck signatures` prints them)")
    group.addoption("--all-not-covered", action="store_true", default=False,
                    help="list every NOT COVERED function at the end, not only those of the areas the "
                         "implementation answers")
    group.addoption("--contract", choices=tuple(numerics.CONTRACTS), default=os.environ.get("LOGITCHECK_CONTRACT", "default"),
                    help="default: accept every correct summation order, judge inputs inside each op's domain, "
                         "grade bad-input refusal; strict: tree-order error, overflow safety, refusal demanded; "
                         "batch_invariant: default plus bitwise-equal op rows for any batch size and row order")


IMPL_FIXTURES = frozenset({"impl", "oimpl", "qimpl"})
AREAS = ("samplers", "ops", "quants", "chains", "engines", "speculative", "zoo", "peers", "gpu", "meta", "protocol")


def area_of(nodeid: str) -> str:
    """The room a test lives in (properties/<room>/...); the engine chains judged whole are "chains"."""
    parts = nodeid.split("::", 1)[0].split("/")
    # from the checkout "properties/<room>/test_x.py"; installed, "<site-packages path>/properties/<room>/..."
    at = max((i for i, p in enumerate(parts[:-2]) if p == "properties"), default=-1)
    room = parts[at + 1] if at >= 0 else "other"
    return "chains" if room == "engines" and "test_chains" in nodeid else room


def judges_impl(item: pytest.Item) -> bool:
    return bool(IMPL_FIXTURES & set(getattr(item, "fixturenames", ())))


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """``--judged-only``: keep the tests that take the implementation (``--area``: of those rooms;
    ``--function``: that call those functions)."""
    wanted = _FUNCTIONS.get("chosen")
    if not config.getoption("--judged-only") and wanted is None:
        return
    areas = set(config.getoption("--area"))
    keep = [i for i in items if judges_impl(i) and (not areas or area_of(i.nodeid) in areas)]
    if wanted is not None:
        silent = [i for i in keep if calls.functions_of(i) is None]  # in the areas asked for
        _FUNCTIONS["silent"] = len(silent)
        keep = [i for i in keep if (calls.functions_of(i) or frozenset()) & wanted]
    drop = [i for i in items if i not in keep]
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_report_header(config: pytest.Config) -> list[str]:
    cp = cupy_or_none()
    device = cupy_device_reason() or "CUDA device available"
    return [
        f"logitcheck: impl={config.getoption('--impl')} backend={config.getoption('--backend')} "
        f"hypothesis profile={profiles.current_profile()} contract={config.getoption('--contract')}",
        f"logitcheck: numpy {np.__version__}, cupy {getattr(cp, '__version__', 'absent')} ({device}), "
        f"python {platform.python_version()}",
    ]


MARKERS = ("peer: differential test against a real peer implementation (llama.cpp, gguf-py, scipy)",
           "slow: long statistical or large-vocab runs",
           "benchmark: speed targets (pytest-benchmark; not run by CI)",
           calls.MARKER_HELP)
"""Registered by the plugin, so that a run of the installed suite (no pyproject.toml) knows them."""

_FUNCTIONS: dict[str, Any] = {}
"""--function: the resolved names ("chosen") and how many judged tests said nothing ("silent")."""


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(case_coverage.CaseCoverage(), "logitcheck-case-coverage")
    from properties.packages import shadowed

    if shadowed():
        raise pytest.UsageError("\n".join(shadowed()))
    for line in MARKERS:
        config.addinivalue_line("markers", line)
    if config.getoption("--function"):
        chosen, problems = calls.resolve(config.getoption("--function"))
        if problems:
            raise pytest.UsageError("\n".join(problems))
        _FUNCTIONS["chosen"] = chosen
    numerics.use_contract(config.getoption("--contract"))
    config.pluginmanager.register(FailingCases(), "logitcheck-failing-cases")
    results = config.getoption("--lc-results")
    if results and not hasattr(config, "workerinput"):  # the controller (or a run without xdist)
        _STREAM["path"] = Path(str(results) + ".failures.jsonl")
        _STREAM["path"].unlink(missing_ok=True)
    # --backend cupy on a machine that cannot run it must not look like a green run of skips
    if config.getoption("--backend") == "emulated":  # imported here: a run on another backend never loads it
        from properties.gpu.emulator.cupy_standin import install as install_emulator
        from properties.gpu.emulator.launch import unavailable_reason as emulator_reason
        reason = emulator_reason()
        if reason:
            raise pytest.UsageError(f"--backend emulated needs a C++ compiler: {reason}")
        install_emulator()
    if config.getoption("--backend") == "cupy":
        reason = cupy_device_reason()
        if reason:
            raise pytest.UsageError(f"--backend cupy needs a usable CUDA device: {reason}")


@pytest.fixture(scope="session")
def backend(request: pytest.FixtureRequest) -> str:
    """The array backend alone (``--backend``), for tests that judge the suite, not ``--impl``
    (the zoos mutate gpu_impl): they are not counted as judging the implementation."""
    return request.config.getoption("--backend")


@pytest.fixture(scope="session")
def impl(request: pytest.FixtureRequest):
    return load_impl(request.config.getoption("--impl"), request.config.getoption("--backend"))


@contextmanager
def covered():
    """Turn a missing impl function into a visible 'not covered' skip; a case the implementation
    answers unsupported leaves that case unjudged, not the test (``properties/case_coverage.py``)."""
    case_coverage.entered()
    try:
        yield
    except CaseUnsupported as exc:
        case_coverage.unsupported(str(exc))
    except NotCovered as exc:
        pytest.skip(f"NOT COVERED: {exc}")


def submodule_impl(impl: Impl, part: str) -> Impl:
    """The implementation's ``part`` module (``--impl gpu_impl`` -> ``gpu_impl.ops``), or a visible
    NOT COVERED skip when the implementation has none."""
    name = f"{impl.name}.{part}"
    carried = part_of(impl, part)
    if carried is not None:
        return load_impl(name, impl.backend, carried)
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name not in (name, impl.name):
            raise
        NOT_COVERED.add(name)
        pytest.skip(f"NOT COVERED: {impl.name} has no {part} module")
    return load_impl(name, impl.backend, module)


@pytest.fixture(scope="session")
def oimpl(impl: Impl) -> Impl:
    """The implementation's ops module: ``--impl gpu_impl`` -> ``gpu_impl.ops``."""
    return submodule_impl(impl, "ops")


@pytest.fixture(scope="session")
def qimpl(impl: Impl) -> Impl:
    """The implementation's quantization module: ``--impl gpu_impl`` -> ``gpu_impl.quants``."""
    return submodule_impl(impl, "quants")


_OUTCOMES: list[dict] = []


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item) -> None:
    recording.CURRENT_TEST = item.nodeid  # the examples noted from here on belong to this test


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo):
    """On the process that ran the test (an xdist worker too), attach the failure's fields (the
    check's ``Failure``: property, record, dtype, case, error in u, category) with the command
    that reruns the test: report properties travel to the controller with the report."""
    outcome = yield
    report = outcome.get_result()
    if judges_impl(item):
        report.user_properties = [*report.user_properties, ("logitcheck_judges_impl", True),
                                  ("logitcheck_calls", sorted(calls.functions_of(item) or ()))]
    if report.failed and call.excinfo is not None:
        rerun = recording.rerun_command(item.config, item.nodeid)
        found = failure_in(call.excinfo.value)
        if found is not None:
            found.rerun = rerun
        notes = tuple(str(n) for n in getattr(call.excinfo.value, "__notes__", ()))
        fields = {**recording.failure_fields(call.excinfo.value, notes), "rerun": rerun}
        report.user_properties = [*report.user_properties, ("logitcheck_failure", fields)]


_JUDGED: dict[str, dict[str, int]] = {}
_STREAM: dict[str, Path] = {}


def _stream_failure(row: dict) -> None:
    """With ``--lc-results PATH``: each failure's row appended to ``PATH.failures.jsonl`` as it
    happens, so a run killed at a time limit (a device step, a CI job) still says what failed and
    why; the results file itself is written only at the end."""
    path = _STREAM.get("path")
    if path is not None:
        with open(path, "a", encoding="utf-8") as f:
            f.write(json.dumps(row, default=str) + "\n")


def _tally(report: pytest.TestReport) -> None:
    """Per area, what the implementation's tests came to: passed, failed, NOT COVERED, other skips."""
    if not dict(report.user_properties).get("logitcheck_judges_impl"):
        return
    row = _JUDGED.setdefault(area_of(report.nodeid), {"passed": 0, "failed": 0, "not covered": 0, "skipped": 0})
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        row["not covered" if "NOT COVERED" in reason else "skipped"] += 1
    else:
        row[report.outcome] += 1


def judged_summary(impl_name: str) -> list[str]:
    """"N tests judged IMPL: P passed, F failed, C NOT COVERED" overall, then per area."""
    def line(label: str, r: dict[str, int]) -> str:
        n = r["passed"] + r["failed"] + r["not covered"]
        other = f" ({r['skipped']} skipped for other reasons)" if r["skipped"] else ""
        return f"{label}{n} tests judged {impl_name}: {r['passed']} passed, {r['failed']} failed, " \
               f"{r['not covered']} NOT COVERED{other}"
    total = {k: sum(r[k] for r in _JUDGED.values()) for k in ("passed", "failed", "not covered", "skipped")}
    return [line("", total)] + [line(f"  {area}: ", r) for area, r in sorted(_JUDGED.items())]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
        _tally(report)
        row = {"nodeid": report.nodeid, "outcome": report.outcome, "duration": round(report.duration, 3),
               "reason": "", "judged": bool(dict(report.user_properties).get("logitcheck_judges_impl"))}
        cases = dict(report.user_properties).get(case_coverage.PROPERTY)
        if cases and not report.skipped:  # some cases answered unsupported, the others judged
            row["cases"] = {"judged": cases["cases"] - cases["unsupported"], "of": cases["cases"]}
        if report.skipped and isinstance(report.longrepr, tuple):
            row["reason"] = report.longrepr[2]
        elif report.failed:  # for the report: the crash line first, then the trace's head and tail
            crash = getattr(report.longrepr, "reprcrash", None)
            first = f"{crash.path}:{crash.lineno}: {crash.message}"[:500] + "\n\n" if crash else ""
            text, room = report.longreprtext, 2000 - len(first) - 7
            if len(text) > room:
                text = text[:room // 3] + "\n[...]\n" + text[-(room - room // 3):]
            row["reason"] = first + text
            row["failure"] = dict(report.user_properties).get("logitcheck_failure", {})
            _stream_failure(row)
        _OUTCOMES.append(row)
        _ROWS.append(_verdict_row(report, row))


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error) -> None:
    """xdist controller: fold a finished worker's measurements into this process's."""
    text = getattr(node, "workeroutput", {}).get("logitcheck")
    if text:
        recording.absorb(text)


# Files whose tests share no table (each test only adds to the worst-error and example counts,
# which add up across workers): their tests are scheduled one by one. A file of the nightly's
# size (engine variants, impl≡oracle: ~1,900 s each at nightly) sent whole would leave the other
# core idle at the end; a meta test checks none of them registers a table.
PER_TEST_FILES = ("properties/samplers/test_impl_vs_oracle.py", "properties/engines/test_variants.py",
                  "properties/samplers/test_determinism.py", "properties/samplers/test_invariants.py",
                  "properties/samplers/test_row_contract.py")


def _queue_rank(scope: str) -> int:
    """0 for a whole file, 1 + its index for a test of a ``PER_TEST_FILES`` file (sorted stably,
    so xdist's order by test count stays within each rank)."""
    path = scope.split("::", 1)[0]
    return next((1 + i for i, f in enumerate(PER_TEST_FILES) if "::" in scope and path.endswith(f)), 0)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """Plain ``-n`` (no ``--dist``) sends whole test files to a worker: a file's tests build its
    tables together (zoo kills, order matrix), so each arrives whole and -n gives the same results;
    the ``PER_TEST_FILES`` are split test by test."""
    explicit = any(a.startswith("--dist") for a in config.invocation_params.args)
    if config.getoption("dist") == "load" and not explicit:
        return file_or_test_scheduling()(config, log)
    return None


def file_or_test_scheduling() -> type:
    """The scheduler class of ``pytest_xdist_make_scheduler`` (xdist imported here: it is optional)."""
    from xdist.scheduler import LoadScopeScheduling

    class _FileOrTest(LoadScopeScheduling):
        _ordered = False

        def _split_scope(self, nodeid: str) -> str:
            path = nodeid.split("::", 1)[0]
            return nodeid if path.endswith(PER_TEST_FILES) else path

        def _assign_work_unit(self, node) -> None:
            # xdist queues scopes by test count, so the one-test scopes (the heaviest single
            # tests: impl≡oracle's mirostat_v2 / typical, 2-7 min each at nightly) went last
            # and one core finished alone; whole files go first, then the split files in
            # PER_TEST_FILES order (heaviest first), so the queue ends on short tests.
            if not self._ordered:
                self._ordered = True
                units = sorted(self.workqueue.items(), key=lambda kv: _queue_rank(kv[0]))
                self.workqueue.clear()
                self.workqueue.update(units)
            try:
                super()._assign_work_unit(node)
            except OSError:
                # The worker died (a test killed it) after reporting its previous test and
                # before this send reached it: the unit stays assigned to it, and its node-down
                # event, which follows, re-queues it (remove_node); xdist's own shutdown
                # ignores a failed send the same way. Raised, it aborted the whole run.
                pass

        def schedule(self) -> None:
            again = self.collection is not None  # a replacement for a crashed worker
            super().schedule()
            if again:
                # xdist gives the newcomer one unit; a unit with one test left then waits for a
                # next test (a worker runs an item once it knows the next one, or is told to
                # stop) that no completion will trigger: with -n 1 the run hung. Fill it as
                # xdist's start does, and tell it to stop when nothing is left.
                for node in self.nodes:
                    while not node.shutting_down and self._pending_of(self.assigned_work[node]) <= 2:
                        if not self.workqueue:
                            node.shutdown()
                            break
                        self._assign_work_unit(node)

        def remove_node(self, node):
            # xdist's scope scheduler re-queues the crashed test with its unit, so a test that
            # kills its process kills every replacement worker in turn (measured: 9 workers
            # for one segfaulting test). Like ``--dist load``, report it once and go on.
            workload = self.assigned_work.pop(node)
            pending = [(scope, nid) for scope, unit in workload.items() for nid, done in unit.items() if not done]
            if not pending:
                return None
            scope, crashed = pending[0]
            workload[scope][crashed] = True
            self.workqueue.update({k: u for k, u in workload.items() if not all(u.values())})
            for other in self.assigned_work:
                self._reschedule(other)
            return crashed

    return _FileOrTest


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    config = session.config
    if hasattr(config, "workeroutput"):  # an xdist worker: the controller writes the file
        config.workeroutput["logitcheck"] = recording.snapshot()
        return
    path = config.getoption("--lc-results")
    if path:
        recording.dump(Path(path), _OUTCOMES, recording.run_meta(config, int(exitstatus)))


_ROWS: list[verdict.Row] = []


def _verdict_row(report: pytest.TestReport, row: dict) -> verdict.Row:
    props = dict(report.user_properties)
    crash = getattr(report.longrepr, "reprcrash", None)
    called = tuple(props.get("logitcheck_calls") or ())
    failure = dict(row.get("failure") or {})
    return verdict.Row(report.nodeid, "failed" if report.failed else report.outcome, area_of(report.nodeid),
                       called, "NOT COVERED" in str(row.get("reason", "")), failure,
                       crash.message if crash else "",
                       calls.blamed(called, str(failure.get("record", "")), crash.message if crash else ""),
                       bool(row.get("judged")))


def pytest_terminal_summary(terminalreporter) -> None:
    config = terminalreporter.config
    everything = config.getoption("--all-not-covered")
    if _JUDGED:
        terminalreporter.section("logitcheck: what judged the implementation")
        for text in judged_summary(config.getoption("--impl")):
            terminalreporter.write_line(text)
        terminalreporter.write_line("per function:")
        for text in verdict.function_lines([r for r in _ROWS if r.judged], everything,
                                           _FUNCTIONS.get("chosen")):
            terminalreporter.write_line(text)
        if _FUNCTIONS.get("silent"):
            terminalreporter.write_line(f"  --function left out {_FUNCTIONS['silent']} judged tests that say no "
                                        f"function they call (properties/calls.py)")
    if NOT_COVERED and (everything or not _JUDGED):
        terminalreporter.section("logitcheck: NOT COVERED (the implementation lacks these)")
        for name in sorted(NOT_COVERED):
            terminalreporter.write_line(f"  {name}")


class FailingCases:
    """The terminal summary's last section: the failures grouped by cause, each group's WHY,
    smallest shrunk case and rerun command once. A hook wrapper that runs outermost, so it writes
    after pytest's short summary, just above the final counts line."""

    @pytest.hookimpl(hookwrapper=True, tryfirst=True)
    def pytest_terminal_summary(self, terminalreporter):
        yield
        failed = [r for r in _ROWS if r.outcome == "failed"]
        if failed:
            n = len(verdict.groups(failed))
            terminalreporter.section(f"logitcheck: failing cases, {len(failed)} in {n} group"
                                     f"{'s' * (n > 1)} by cause (rerun each with its command)")
            for text in verdict.failure_lines(failed):
                terminalreporter.write_line(text)
