"""Progress on long runs: one line every ``every`` seconds with tests done, failures so far,
elapsed time and the estimated time left (pytest's own dots say nothing while a long hypothesis
test runs, and a nightly has tests of several minutes). Works on the xdist controller too.

The estimate weights each test by its duration in a baseline run when one is given (``logitcheck
report --baseline``): test counts alone mislead, since most of the nightly's time is in a few
long tests that finish late (measured at seed 1: "about 1m15s left" at 17 min with 24 minutes to go)."""
from __future__ import annotations

import time
from typing import Any

import pytest


class Progress:
    def __init__(self, every: float = 30.0, durations: dict[str, float] | None = None) -> None:
        self.every, self.total, self.done, self.failed = every, 0, 0, 0
        self.durations = durations or {}  # nodeid -> seconds in the baseline run
        self.weight_done = 0.0
        self.t0 = self.last = time.monotonic()
        self.reporter = None  # pytest's terminal reporter, looked up once the run has one
        self.config: pytest.Config | None = None

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.total = len(session.items)

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids) -> None:
        self.total = max(self.total, len(ids))

    def pytest_configure(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when == "call" or (report.when == "setup" and report.outcome != "passed"):
            self.done += 1
            self.failed += report.failed
            self.weight_done += self.durations.get(report.nodeid, 0.0)
        now = time.monotonic()
        if self.reporter is None and self.config is not None:
            self.reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if report.when == "teardown" and now - self.last >= self.every and self.reporter is not None:
            self.last = now
            self.reporter.write_line(self.line(now))

    def line(self, now: float) -> str:
        elapsed = now - self.t0
        weight = sum(self.durations.values())
        if self.weight_done > 0 and weight > self.weight_done:
            eta = f", about {_mmss(elapsed * (weight - self.weight_done) / self.weight_done)} left (baseline durations)"
        elif self.done and self.total:
            eta = f", about {_mmss(elapsed / self.done * (self.total - self.done))} left (by test count)"
        else:
            eta = ""
        of = f"/{self.total}" if self.total else ""
        return f"[logitcheck] {self.done}{of} tests, {self.failed} failed, {_mmss(elapsed)} elapsed{eta}"


def baseline_durations(results: dict[str, Any] | None) -> dict[str, float]:
    """nodeid -> duration from a results.json (schema 2); malformed entries are skipped, since a
    baseline only steers the estimate."""
    tests = (results or {}).get("tests")
    out: dict[str, float] = {}
    for t in tests if isinstance(tests, list) else ():
        if isinstance(t, dict) and isinstance(t.get("nodeid"), str) and isinstance(t.get("duration"), (int, float)):
            out[t["nodeid"]] = max(float(t["duration"]), 0.0)
    return out


def _mmss(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m}m{s:02d}s"
