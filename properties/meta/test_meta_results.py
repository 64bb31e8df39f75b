"""Meta: results.json as the pytest plugin writes it: histograms and quantiles, the worst cases,
and pytest-xdist: workers' measurements merge into one file equal to a one-process run's."""
from __future__ import annotations

import json
import math
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from properties.packages import checkout_env
from properties import recording
from reports.schema import problems

TEST_A = '''
from hypothesis import given, strategies as st
from properties import recording
from properties.measure import ErrorReport
from properties.samplers import checks
from properties.samplers.strategies import Case
from properties.meta.test_meta_results import skewed_softmax

@given(st.integers(0, 1000))
def test_measured(x):
    recording.note("rec_a", "impl_vs_oracle", "float32", ErrorReport(x / 100, 20.0, 0), f"Case(x={x})")
    recording.note("exact_rec", "exact", "float32")
    recording.table("table_a", {"x": 1})

@given(st.integers(0, 1000))
def test_fails(seed):  # no local is named like a drawn case: the check's Failure carries it
    if seed > 500:
        checks.check_softmax_invariants(skewed_softmax, Case("zipf", 16, "float32", (seed,)), 0)
'''
TEST_B = '''
from hypothesis import given, strategies as st
from properties import recording
from properties.measure import ErrorReport
ROWS = []

@given(st.integers(0, 1000))
def test_b(x):
    recording.note("rec_b", "p", "float16", ErrorReport(float(x), 10.0, 0))
    recording.note("rec_a", "impl_vs_oracle", "float32", ErrorReport(x / 50, 20.0, 0), f"x={x}")
    ROWS.append(x)
    recording.table("table_b", [{"rows": "some"}])
'''


def test_bins_and_quantiles():
    assert [recording.bin_key(x) for x in (0.0, 1e-9, 0.5, 1.0, 1.0001, 1e12, math.inf, math.nan)] == \
        ["zero", "-24", "-2", "-1", "0", "36", "inf", "nan"]
    assert recording.bin_upper("-1") == 1.0  # at the bound exactly: a bin that ends at the bound
    hist = {"zero": 5, "-4": 3, "0": 1, "nan": 1}
    assert recording.quantile(hist, 0.5) == 0.0 and recording.quantile(hist, 0.8) == pytest.approx(10 ** -0.75)
    assert math.isnan(recording.quantile(hist, 0.99)) and recording.quantile({}, 0.5) is None


ROOT = Path(__file__).resolve().parents[2]
# The inner runs load only the plugins they use: pytest's entry-point autoload (anyio, benchmark, ...)
# cost 2 s per process, and an -n 2 run with a crash starts four (5.9 s of 8.2 s measured).
LEAN_ENV = checkout_env(PYTEST_DISABLE_PLUGIN_AUTOLOAD="1")
LEAN_PYTEST = [sys.executable, "-m", "pytest", "-p", "xdist.plugin", "-p", "properties.plugin",
               "-p", "no:cacheprovider", "-q"]


def skewed_softmax(fn: str, x: np.ndarray) -> np.ndarray:
    """A softmax whose probabilities are all 0.1 % high (Σp = 1.001): a bug the softmax check
    measures in u against its normaliser's bound."""
    z = np.exp(x.astype(np.float64) - x.max(axis=-1, keepdims=True))
    return (z / z.sum(axis=-1, keepdims=True) * 1.001).astype(np.float32)


def _run(tmp: Path, *extra: str) -> dict:
    out = tmp / f"results{len(extra)}.json"
    proc = subprocess.run([*LEAN_PYTEST, "-p", "_hypothesis_pytestplugin", "--hypothesis-profile=ci",
                           "--lc-results", str(out), *extra],
                          cwd=tmp, env=LEAN_ENV, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]  # test_fails fails, nothing else
    (tmp / f"stdout{len(extra)}.txt").write_text(proc.stdout)
    return json.loads(out.read_text())


def _comparable(results: dict) -> dict:
    """What must not depend on the process layout: everything but timings and the worker count."""
    r = json.loads(json.dumps(results))
    for t in r["tests"]:
        t.pop("duration")
        t["reason"] = t["reason"].split("\n")[0]
    for k in ("date", "duration_s", "workers"):
        r["meta"].pop(k)
    return r


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> tuple[dict, dict, Path]:
    pytest.importorskip("xdist", reason="pytest-xdist is in the test extra: pip install -e '.[test]'")
    tmp = tmp_path_factory.mktemp("xdist")
    (tmp / "test_a.py").write_text(textwrap.dedent(TEST_A))
    (tmp / "test_b.py").write_text(textwrap.dedent(TEST_B))
    return _run(tmp), _run(tmp, "-n", "2"), tmp


def test_plugin_output_follows_the_schema(runs):
    one, _, _ = runs
    assert problems(one) == []
    failed = next(t for t in one["tests"] if t["outcome"] == "failed")
    rerun = "python -m pytest -p properties.plugin test_a.py::test_fails --hypothesis-profile=ci"
    assert failed["reproduce"] == rerun
    assert failed["failure"] == _shrunk_failure(rerun)


def _shrunk_failure(rerun: str) -> dict:
    """The fields of the Failure test_a.py's check raises on its shrunk example (seed 501)."""
    from properties.failure import Failure
    from properties.samplers import checks
    from properties.samplers.strategies import Case

    with pytest.raises(Failure) as caught:
        checks.check_softmax_invariants(skewed_softmax, Case("zipf", 16, "float32", (501,)), 0)
    caught.value.rerun = rerun
    return caught.value.fields()


def test_a_checks_failure_reaches_the_results_row_with_every_field(runs):
    """Property, record, dtype, case, error and bound in u, category and rerun command: read off the
    check's exception, not its message; the test body names no local ``case`` or ``example``."""
    one, _, tmp = runs
    f = next(t for t in one["tests"] if t["outcome"] == "failed")["failure"]
    assert f["property"] == "softmax invariants row 0" and f["record"] == "softmax" and f["dtype"] == "float32"
    assert f["case"] == "Case(family='zipf', vocab=16, dtype='float32', seeds=(501,), params={})"
    assert f["category"] == "error bound" and f["error_u"] > f["bound_u"] > 0 and f["ratio"] > 1
    assert f["rerun"] == "python -m pytest -p properties.plugin test_a.py::test_fails --hypothesis-profile=ci"
    out = (tmp / "stdout0.txt").read_text()  # the terminal summary ends with the case and its rerun
    tail = out[out.index("logitcheck: failing cases"):]
    assert f["case"] in tail and f"rerun {f['rerun']}" in tail and "short test summary" not in tail
    rec_a = next(w for w in one["worst_error"] if w["record"] == "rec_a")
    assert rec_a["n"] == 80 and sum(rec_a["ratio_hist"].values()) == 80  # 40 examples from each test
    worst = rec_a["worst_cases"][0]  # test_b's x / 50 beats test_a's x / 100: the case names its x
    assert worst["test"] == "test_b.py::test_b" and worst["case"] == f"x={round(worst['worst_u'] * 50)}"
    assert worst["ratio"] == rec_a["ratio"] == max(c["ratio"] for c in rec_a["worst_cases"])
    assert {"record": "exact_rec", "property": "exact", "count": 40, "test": "test_a.py::test_measured"} \
        in one["examples"]


def test_xdist_workers_merge_into_the_same_results(runs):
    one, two, _ = runs
    assert two["meta"]["workers"] == 2
    assert _comparable(one) == _comparable(two)


def test_absorb_is_independent_of_the_split():
    """Merging is order-free: the worst case and histograms do not depend on which worker saw what."""
    saved = (dict(recording.WORST), dict(recording.EXAMPLES), dict(recording.FIRST_TEST), dict(recording.TABLES))
    try:
        def state(notes: list[tuple[float, str]]) -> str:
            recording.WORST.clear(), recording.EXAMPLES.clear(), recording.FIRST_TEST.clear(), recording.TABLES.clear()
            for ratio, test in notes:
                recording.CURRENT_TEST = test
                recording.note("r", "p", "float32", recording.ErrorReport(ratio * 4, 4.0, 0))
            return recording.snapshot()
        notes = [(0.5, "t1"), (0.0, "t2"), (math.nan, "t1"), (0.25, "t3"), (0.5, "t0"), (2.0, "t2")]
        whole = state(notes)
        parts = [state(notes[i::2]) for i in (1, 0)]
        recording.WORST.clear(), recording.EXAMPLES.clear(), recording.FIRST_TEST.clear()
        for p in parts:
            recording.absorb(p)
        assert json.loads(recording.snapshot()) == json.loads(whole)
    finally:
        for live, old in zip((recording.WORST, recording.EXAMPLES, recording.FIRST_TEST, recording.TABLES), saved):
            live.clear()
            live.update(old)


def test_progress_line_counts_and_estimates():
    from types import SimpleNamespace

    from reports.progress import Progress, baseline_durations

    def two_tests(durations):
        lines: list[str] = []
        p = Progress(every=0.0, durations=durations)
        p.reporter = SimpleNamespace(write_line=lines.append)
        p.total, p.t0 = 4, p.t0 - 120.0  # two minutes in
        for nodeid, outcome in (("a", "passed"), ("b", "failed")):
            for when in ("setup", "call", "teardown"):
                p.pytest_runtest_logreport(SimpleNamespace(
                    nodeid=nodeid, when=when, outcome=outcome if when == "call" else "passed",
                    failed=outcome == "failed" and when == "call"))
        return lines[-1]

    line = two_tests(None)  # half the tests in 2 min: 2 min left
    assert line.startswith("[logitcheck] 2/4 tests, 1 failed, 2m0") and "about 2m0" in line and "by test count" in line
    # the two done tests took 10 s of the baseline's 70 s: 60 s left at that pace is 12 min here
    line = two_tests(baseline_durations({"tests": [{"nodeid": k, "duration": d} for k, d in
                                                  (("a", 4.0), ("b", 6), ("c", 10.0), ("d", 50.0))]
                                                 + [{"nodeid": "e"}, {"duration": 3.0}, "junk"]}))
    assert "about 12m0" in line and "baseline durations" in line, line
    assert baseline_durations({"tests": None}) == baseline_durations(None) == {}


def test_files_scheduled_test_by_test_share_no_table():
    """``-n`` splits ``PER_TEST_FILES`` test by test; that gives the one-process results only while
    none of their tests builds a table (tables merge by key, not by summing, see ``absorb``)."""
    from properties.plugin import PER_TEST_FILES

    root = Path(__file__).resolve().parents[2]
    for name in PER_TEST_FILES:
        text = (root / name).read_text()
        assert "recording.table" not in text and "TABLES" not in text, f"{name} builds a table: schedule it whole"


def test_queue_sends_whole_files_first_then_split_files_heaviest_first():
    """The one-test scopes must not all wait behind the files (one core would finish the
    nightly's 2-7 min impl≡oracle tests alone): files rank 0, split tests by file position."""
    from properties.plugin import PER_TEST_FILES, _queue_rank

    scopes = [f"{PER_TEST_FILES[-1]}::t[a]", "properties/peers/llama_cpp/test_llama_cpp.py",
              f"{PER_TEST_FILES[0]}::t[b]", "properties/ops/test_ops.py", f"{PER_TEST_FILES[1]}::t[c]"]
    assert sorted(scopes, key=_queue_rank) == [
        "properties/peers/llama_cpp/test_llama_cpp.py", "properties/ops/test_ops.py", f"{PER_TEST_FILES[0]}::t[b]",
        f"{PER_TEST_FILES[1]}::t[c]", f"{PER_TEST_FILES[-1]}::t[a]"]


@pytest.mark.parametrize("workers", ["1", "2"])
def test_a_test_that_kills_its_worker_fails_once_and_the_run_goes_on(tmp_path, workers):
    """A segfaulting test (a peer's C code can do that) is reported once as crashed and the rest
    of its file still runs; xdist's scope scheduler alone re-queued it on every replacement worker,
    and with one worker the replacement, given the file's one remaining test, waited forever."""
    (tmp_path / "test_a.py").write_text("import ctypes\ndef test_1(): pass\n"
                                        "def test_crash(): ctypes.string_at(0)\ndef test_3(): pass\n")
    (tmp_path / "test_b.py").write_text("def test_b1(): pass\ndef test_b2(): pass\n")
    proc = subprocess.run([*LEAN_PYTEST, "-n", workers, str(tmp_path)], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env=LEAN_ENV)
    assert "1 failed, 4 passed" in proc.stdout, proc.stdout[-1500:]
    # One crashed worker, one failure line; the summary line's length depends on $CI (pytest does not
    # truncate it there), so count lines, not the message.
    assert proc.stdout.count("node down") == 1, proc.stdout[-1500:]
    failed = [ln for ln in proc.stdout.splitlines() if ln.startswith("FAILED")]
    assert len(failed) == 1 and failed[0].startswith("FAILED test_a.py::test_crash - worker 'gw"), failed


def test_a_worker_dead_before_its_next_unit_is_sent_loses_nothing():
    """The race behind a nightly INTERNALERROR: a worker reports a test, then dies (the next test
    it already held killed it) before the controller's send of its next unit; the send raises
    OSError. The scheduler keeps going: the crashed test is reported once and every other test of
    the dead worker, the unit that failed to send included, is queued again."""
    from collections import OrderedDict

    from xdist.remote import Producer

    from properties.plugin import file_or_test_scheduling

    class DeadWorker:
        shutting_down = False

        def send_runtest_some(self, indices):
            raise OSError("cannot send (already closed?)")

        def shutdown(self):
            self.shutting_down = True

    cls = file_or_test_scheduling()
    sched = cls.__new__(cls)  # the state xdist's __init__ and collection would leave
    node = DeadWorker()
    ids = ["a.py::t1", "a.py::crash", "a.py::t3", "b.py::b1", "b.py::b2"]
    sched.collection, sched.registered_collections, sched.log = ids, {node: ids}, Producer("test", enabled=False)
    sched.assigned_work = {node: {"a.py": {"a.py::t1": False, "a.py::crash": False, "a.py::t3": False}}}
    sched.workqueue = OrderedDict({"b.py": {"b.py::b1": False, "b.py::b2": False}})
    sched.mark_test_complete(node, 0)  # t1 reported: b.py is sent to the dead worker and fails
    assert sched.remove_node(node) == "a.py::crash"
    assert dict(sched.workqueue) == {"a.py": {"a.py::t1": True, "a.py::crash": True, "a.py::t3": False},
                                     "b.py": {"b.py::b1": False, "b.py::b2": False}}
