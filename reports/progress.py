"""Progress on long runs: one line every ``every`` seconds with tests done, failures so far,
elapsed time and the estimated time left (pytest's own dots say nothing while a long hypothesis
test runs, and a nightly has tests of several minutes). Works on the xdist controller too.

The estimate weights each test by its duration in a baseline run when one is given (``logitcheck
report --baseline``): test counts alone mislead, since most of the nightly's time is in a few
long tests that finish late (measured at seed 1: "about 1m15s left" at 17 min with 24 minutes to go).

With ``areas`` (a node id -> area function), every periodic line ends with each unfinished area's
count, and an area's line is written the moment its last test finishes (passed, failed, NOT
COVERED): an engine author sees samplers' verdict while ops and quants still run. Lines, not a
bar, so that a CI log keeps them."""
from __future__ import annotations

import time
from collections import Counter
from typing import Any, Callable

import pytest


class Progress:
    def __init__(self, every: float = 30.0, durations: dict[str, float] | None = None,
                 areas: Callable[[str], str] | None = None) -> None:
        self.every, self.total, self.done, self.failed = every, 0, 0, 0
        self.area_of = areas
        self.area_total: Counter = Counter()
        self.area_done: dict[str, Counter] = {}
        self.durations = durations or {}  # nodeid -> seconds in the baseline run
        self.weight_done = 0.0
        self.t0 = self.last = time.monotonic()
        self.reporter = None  # pytest's terminal reporter, looked up once the run has one
        self.config: pytest.Config | None = None

    @pytest.hookimpl(trylast=True)
    def pytest_collection_finish(self, session: pytest.Session) -> None:
        self.total = len(session.items)
        self._count_areas([i.nodeid for i in session.items])

    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_node_collection_finished(self, node, ids) -> None:
        self.total = max(self.total, len(ids))
        self._count_areas(ids)

    def _count_areas(self, ids: list[str]) -> None:
        if self.area_of is not None and not self.area_total:  # every xdist worker collects the same
            self.area_total = Counter(self.area_of(i) for i in ids)

    def pytest_configure(self, config: pytest.Config) -> None:
        self.config = config

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        finished = report.when == "call" or (report.when == "setup" and report.outcome != "passed")
        if finished:
            self.done += 1
            self.failed += report.failed
            self.weight_done += self.durations.get(report.nodeid, 0.0)
        now = time.monotonic()
        if self.reporter is None and self.config is not None:
            self.reporter = self.config.pluginmanager.get_plugin("terminalreporter")
        if finished and self.area_of is not None:
            area = self.area_of(report.nodeid)
            counts = self.area_done.setdefault(area, Counter())
            counts[outcome(report)] += 1
            if sum(counts.values()) == self.area_total.get(area) and self.reporter is not None:
                self.reporter.write_line(self.area_line(area, now))
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
        running = [f"{a} {sum(self.area_done.get(a, Counter()).values())}/{n}" for a, n in sorted(self.area_total.items())
                   if sum(self.area_done.get(a, Counter()).values()) < n]
        areas = f" · {', '.join(running)}" if running else ""
        return f"[logitcheck] {self.done}{of} tests, {self.failed} failed, {_mmss(elapsed)} elapsed{eta}{areas}"

    def area_line(self, area: str, now: float) -> str:
        c = self.area_done.get(area, Counter())
        parts = [f"{c[k]} {k}" for k in ("passed", "FAILED", "NOT COVERED", "skipped") if c[k]]
        return f"[logitcheck] {area} done: {sum(c.values())} tests, {', '.join(parts)} ({_mmss(now - self.t0)} elapsed)"


def outcome(report: pytest.TestReport) -> str:
    """passed, FAILED, NOT COVERED (a skip saying so: the implementation lacks the function) or skipped."""
    if report.failed:
        return "FAILED"
    if report.skipped:
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)
        return "NOT COVERED" if "NOT COVERED" in reason else "skipped"
    return "passed"


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
