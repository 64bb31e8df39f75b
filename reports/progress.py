"""Progress on long runs: one line every ``every`` seconds with tests done, failures so far,
elapsed time and the estimated time left (pytest's own dots say nothing while a long hypothesis
test runs, and a nightly has tests of several minutes). Works on the xdist controller too."""
from __future__ import annotations

import time

import pytest


class Progress:
    def __init__(self, every: float = 30.0) -> None:
        self.every, self.total, self.done, self.failed = every, 0, 0, 0
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
        now = time.monotonic()
        if self.reporter is None and self.config is not None:
            self.reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if report.when == "teardown" and now - self.last >= self.every and self.reporter is not None:
            self.last = now
            self.reporter.write_line(self.line(now))

    def line(self, now: float) -> str:
        elapsed = now - self.t0
        left = elapsed / self.done * (self.total - self.done) if self.done and self.total else None
        eta = f", about {_mmss(left)} left" if left is not None else ""
        of = f"/{self.total}" if self.total else ""
        return f"[logitcheck] {self.done}{of} tests, {self.failed} failed, {_mmss(elapsed)} elapsed{eta}"


def _mmss(seconds: float) -> str:
    m, s = divmod(int(seconds), 60)
    return f"{m}m{s:02d}s"
