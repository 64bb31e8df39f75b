"""NOT COVERED per case. A harness that answers ``ERROR unsupported`` (or a case the protocol
cannot carry) leaves that one case unjudged, not the test: inside a hypothesis test the case is
rejected (``hypothesis.reject``) and the test goes on with its other cases; it then reports
"judged on N of M cases". A test none of whose cases was supported (hypothesis finds no valid
example, or gives up on too many rejected ones) is NOT COVERED, as is a test outside hypothesis
(its one case). A function the implementation lacks altogether stays NOT COVERED for the test.

Counts are per test, on the process that ran it; they travel to an xdist controller as report
properties, so the summary holds every worker's tests."""
from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import reject
from hypothesis.control import currently_in_test_context
from hypothesis.errors import FailedHealthCheck, Unsatisfiable

from properties import recording
from properties.backends import CALLED

CASES: Counter[str] = Counter()
"""Cases each test entered (``covered()`` blocks run)."""
UNSUPPORTED: Counter[str] = Counter()
"""Of those, the cases the implementation answered unsupported."""
PROPERTY = "logitcheck_cases"


def entered() -> None:
    CASES[recording.CURRENT_TEST] += 1


def unsupported(why: str) -> None:
    """Leave this case unjudged: reject it inside hypothesis, else skip the test NOT COVERED."""
    UNSUPPORTED[recording.CURRENT_TEST] += 1
    if currently_in_test_context():
        reject()
    pytest.skip(f"NOT COVERED: {why}")


CALLED_PROPERTY = "logitcheck_called"


def _whole_judged_run(config: pytest.Config) -> bool:
    """A ``--judged-only`` run of every area, no test file, ``-k`` or function chosen (what
    ``logitcheck judge`` runs by default): only there is "called by no test" a finding."""
    chosen = [config.getoption(o, default=None) for o in ("--area", "-k", "--function")]
    files = [a for a in config.args if ".py" in a]
    return bool(config.getoption("--judged-only")) and not any(chosen) and not files


def listed_unjudged(impl_name: str, backend: str, called: set[str]) -> list[str]:
    """The functions of the signature table the implementation has (a harness: lists) that no
    test of a whole ``--judged-only`` run called: each is a gap of the judge, never a pass."""
    from properties.backends import load_impl, part_of
    from properties.protocol.signatures import table

    try:
        impl = load_impl(impl_name, backend)
    except Exception as exc:  # the run itself reported why the implementation does not load
        return [f"(not checked: {impl_name} does not load: {exc})"]

    def has(qualified: str) -> bool:
        part, _, fn = qualified.rpartition(".")
        if not part:
            return impl.has(fn)
        mod = part_of(impl, part)
        if mod is None:
            import importlib
            try:
                mod = importlib.import_module(f"{impl.name}.{part}")
            except ImportError:
                return False
        return callable(getattr(mod, fn, None))

    return [f"{r.qualified}: listed, called by no test" for r in table() if r.qualified not in called and has(r.qualified)]


def judged_line(nodeid: str, cases: int, unsupported_: int) -> str:
    return f"{nodeid}: judged on {cases - unsupported_} of {cases} cases ({unsupported_} answered unsupported)"


class CaseCoverage:
    """pytest hooks: a test whose every case was unsupported becomes a NOT COVERED skip; the count
    of each test with an unsupported case is attached to its report and listed in the summary."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.called: set[str] = set()
        self._sent: set[str] = set()

    @pytest.hookimpl(wrapper=True)
    def pytest_pyfunc_call(self, pyfuncitem: pytest.Function):
        try:
            return (yield)
        except (Unsatisfiable, FailedHealthCheck) as exc:
            n, u = CASES[pyfuncitem.nodeid], UNSUPPORTED[pyfuncitem.nodeid]
            if not u:
                raise
            pytest.skip(f"NOT COVERED: the implementation answered unsupported for {u} of {n} cases and "
                        f"hypothesis found too few others ({type(exc).__name__})")

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo):
        outcome = yield
        report = outcome.get_result()
        if call.when == "call" and UNSUPPORTED[item.nodeid]:
            counts = {"cases": CASES[item.nodeid], "unsupported": UNSUPPORTED[item.nodeid]}
            report.user_properties = [*report.user_properties, (PROPERTY, counts)]
        if call.when == "call" and CALLED - self._sent:  # the functions first called here, to the controller
            report.user_properties = [*report.user_properties, (CALLED_PROPERTY, sorted(CALLED - self._sent))]
            self._sent |= CALLED

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.called.update(dict(report.user_properties).get(CALLED_PROPERTY, ()))
        counts = dict(report.user_properties).get(PROPERTY)
        if report.when == "call" and counts and report.outcome != "skipped":
            self.lines.append(judged_line(report.nodeid, counts["cases"], counts["unsupported"]))

    def pytest_terminal_summary(self, terminalreporter) -> None:
        config = terminalreporter.config
        if _whole_judged_run(config):
            lines = listed_unjudged(config.getoption("--impl"), config.getoption("--backend"), self.called)
            if lines:
                terminalreporter.section("logitcheck: listed by the implementation, judged by no test")
                for line in lines:
                    terminalreporter.write_line(f"  {line}")
        if self.lines:
            terminalreporter.section("logitcheck: NOT COVERED per case (the other cases were judged)")
            for line in sorted(self.lines):
                terminalreporter.write_line(f"  {line}")
