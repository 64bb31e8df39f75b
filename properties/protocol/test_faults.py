"""Every way a harness can misbehave, each with a harness of the suite's own that does it
(``testing/pyharness.py --fault MODE``): the fault reported (its message names the call), the
restart policy, a wall-time bound and the memory bound (``harness.memory_bound``, measured with
tracemalloc over the faulty call)."""
from __future__ import annotations

import os
import subprocess
import sys
import time
import tracemalloc

import numpy as np
import pytest

import gpu_impl
from properties.backends import load_impl
from properties.protocol.harness import FAULTS_IN_A_ROW, HarnessFault, HarnessGivenUp, exec_module, memory_bound
from properties.protocol.pipes import STDERR_KEEP
from properties.protocol.testing.fixtures import HARNESS, judged, own_not_covered  # noqa: F401 (autouse)

X = np.random.default_rng(0).normal(size=(2, 300)).astype(np.float32)
P = np.array([0.9, 0.5])
CALL = "top_p(logits f32[2,300], p f64[2], min_keep=0)"
ARGS = [("logits", X), ("p", P), ("min_keep", 0)]
TIMEOUT_S = 2
FAST_S = 5.0
"""A fault that needs no timeout is reported within this (kill, exit status, stderr's last words;
a shared CI machine's slack included): the judge never waits on such a harness."""


@pytest.fixture(autouse=True)
def _short_timeout(monkeypatch):
    monkeypatch.setenv("LOGITCHECK_EXEC_TIMEOUT", str(TIMEOUT_S))


def measured(call):
    """(the exception the call raised or its result, wall seconds, peak bytes traced)."""
    tracemalloc.start()
    t0 = time.monotonic()
    try:
        out = call()
    except Exception as exc:  # the fault is what is measured
        out = exc
    wall = time.monotonic() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    return out, wall, peak


RESTARTED = [  # (mode, the message's start, what else it must say)
    ("crash", "harness crashed during", "status 139"),
    ("malformed", "harness sent a malformed frame answering", "'OK <n>'"),
    ("short", "harness sent a short frame answering", "2400 bytes, 12 arrived, then the process exited (status 0)"),
    ("wrong_shape", "harness answered with the wrong shape/dtype for", "shape (599,), expected (2, 300)"),
    ("wrong_dtype", "harness answered with the wrong shape/dtype for", "i64, expected f32"),
    ("f64", "harness answered with the wrong shape/dtype for", "f64, expected f32"),
    ("trailing", "harness sent bytes outside an answer:", f"after its answer to {CALL}"),
    ("chatty_crash", "harness crashed during", "; stderr: ...tter"),
    ("huge_1g", "harness answered with the wrong shape/dtype for", "shape (268435456,)"),
    ("huge_64g", "harness answered with the wrong shape/dtype for", "shape (17179869184,)"),
    ("close_stdout", "harness crashed during", "closed its output but kept running (killed)"),
]


@pytest.mark.parametrize("mode, starts, says", RESTARTED, ids=[m for m, _, _ in RESTARTED])
def test_a_fault_fails_its_call_and_the_next_call_is_answered(mode, starts, says):
    impl = judged(mode)
    h = impl.module.HARNESS
    out, wall, peak = measured(lambda: impl("top_p", X, P, 0))
    assert isinstance(out, HarnessFault), out
    message = str(out)
    assert message.startswith(f"{starts} {CALL}" if starts.endswith(("during", "answering", "for")) else starts), message
    assert says in message and CALL in message, message
    assert len(message) < 2000, "the message carries stderr's tail, not all of it"
    assert wall <= FAST_S, f"{mode} took {wall:.2f} s to report"
    assert peak <= memory_bound("top_p", ARGS), f"{mode}: {peak} bytes traced, bound {memory_bound('top_p', ARGS)}"
    assert h.proc is None  # killed at once
    assert np.array_equal(impl("softmax", X), gpu_impl.softmax(X))  # the run goes on, on a new process
    assert h.restarts == 1


@pytest.mark.parametrize("mode, starts", [("hang", "harness hung: no complete answer to"),
                                          ("short_wait", "harness sent a short frame answering")])
def test_a_timeout_costs_one_timeout_per_test(mode, starts, monkeypatch):
    """A harness that stops answering costs the timeout once; the rest of that test's calls fail
    at once with that fault; the next test gets a new process."""
    impl = judged(mode)
    h = impl.module.HARNESS
    out, wall, peak = measured(lambda: impl("top_p", X, P, 0))
    assert isinstance(out, HarnessFault) and str(out).startswith(f"{starts} {CALL}"), out
    assert f"within {TIMEOUT_S} s (LOGITCHECK_EXEC_TIMEOUT" in str(out)
    if mode == "short_wait":
        assert "announced 2400 bytes, 12 arrived, then nothing" in str(out), out
    assert TIMEOUT_S <= wall <= TIMEOUT_S + FAST_S
    assert peak <= memory_bound("top_p", ARGS)
    t0 = time.monotonic()
    with pytest.raises(HarnessGivenUp) as again:  # a BaseException: hypothesis stops here
        impl("softmax", X)
    assert str(again.value).startswith(str(out)[:60]) and "was not sent" in str(again.value)
    assert time.monotonic() - t0 < 0.5 and h.starts == 1
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "another_test.py::test (call)")
    assert np.array_equal(impl("softmax", X), gpu_impl.softmax(X))
    assert h.starts == 2


def test_a_harness_faulting_on_every_call_is_restarted_a_few_times_per_test(monkeypatch):
    impl = judged("wrong_shape", on="all")
    h = impl.module.HARNESS
    t0 = time.monotonic()
    faults = []
    for _ in range(20):  # hypothesis's examples and shrink steps, as a test makes them
        with pytest.raises((HarnessFault, HarnessGivenUp)) as info:
            impl("top_p", X, P, 0)
        faults.append(str(info.value))
    assert info.type is HarnessGivenUp
    assert h.starts == FAULTS_IN_A_ROW  # the first process and two restarts, then no more in this test
    assert all(f.startswith(f"harness answered with the wrong shape/dtype for {CALL}") for f in faults)
    assert all("was not sent" in f for f in faults[FAULTS_IN_A_ROW:])
    assert time.monotonic() - t0 <= FAULTS_IN_A_ROW * FAST_S
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "another_test.py::test (call)")
    for _ in range(5):
        with pytest.raises((HarnessFault, HarnessGivenUp), match="^harness answered with the wrong shape"):
            impl("top_p", X, P, 0)
    assert h.starts == FAULTS_IN_A_ROW + 1  # a new test tries one new process, no more after a test given up


def test_after_a_test_given_up_an_answer_restores_the_restarts(monkeypatch):
    impl = judged("crash")
    h = impl.module.HARNESS
    for _ in range(FAULTS_IN_A_ROW + 2):
        with pytest.raises((HarnessFault, HarnessGivenUp)):
            impl("top_p", X, P, 0)
    assert h.starts == FAULTS_IN_A_ROW
    monkeypatch.setenv("PYTEST_CURRENT_TEST", "another_test.py::test (call)")
    assert np.array_equal(impl("softmax", X), gpu_impl.softmax(X))  # an answer resets the count
    for _ in range(FAULTS_IN_A_ROW):
        with pytest.raises(HarnessFault, match="^harness crashed during top_p"):
            impl("top_p", X, P, 0)
    assert h.starts == 2 * FAULTS_IN_A_ROW


def test_faults_between_answers_restart_every_time():
    """Only faults in a row give up: a function that faults while others answer is restarted
    at each fault (hypothesis's shrinking needs the real fault, case by case)."""
    impl = judged("crash")
    for _ in range(2 * FAULTS_IN_A_ROW):
        with pytest.raises(HarnessFault, match="^harness crashed during top_p"):
            impl("top_p", X, P, 0)
        assert np.array_equal(impl("softmax", X), gpu_impl.softmax(X))
    assert impl.module.HARNESS.restarts == 2 * FAULTS_IN_A_ROW


def test_a_reported_failure_keeps_the_process():
    impl = judged("failed")
    for _ in range(2 * FAULTS_IN_A_ROW):
        with pytest.raises(HarnessFault, match=r"^harness reported a failure in top_p\(.*told to failed"):
            impl("top_p", X, P, 0)
    assert impl.module.HARNESS.starts == 1 and impl.module.HARNESS.proc is not None


def test_a_late_duplicate_answer_is_caught_by_its_call_id():
    """Version 2: the repeated answer carries the previous call's id; the next call fails with
    that, never takes it for its own."""
    impl = judged("late_duplicate")
    assert np.array_equal(impl("top_p", X, P, 0), gpu_impl.top_p(X, P, 0))
    with pytest.raises(HarnessFault, match=r"^harness answered the wrong call: OK for call id '1' while 2 \(softmax"):
        impl("softmax", X)
    assert np.array_equal(impl("softmax", X), gpu_impl.softmax(X))


@pytest.mark.parametrize("mode", ["late_duplicate", "trailing"])
def test_version_1_is_read_and_stray_bytes_are_still_caught(mode):
    """Version 1 has no call ids: bytes after an answer are caught when they are there by the
    time the answer is read (the same write) or the next call is due; a harness that repeats
    each answer in lockstep with the judge can stay one answer behind unseen (docs/protocol.md)."""
    impl = judged(mode, extra=" --version 1")
    assert impl.module.HARNESS.version == 1
    if mode == "late_duplicate":
        assert np.array_equal(impl("top_p", X, P, 0), gpu_impl.top_p(X, P, 0))
        time.sleep(0.6)
        call = lambda: impl("softmax", X)  # noqa: E731
    else:
        call = lambda: impl("top_p", X, P, 0)  # noqa: E731
    with pytest.raises(HarnessFault, match="^harness sent bytes outside an answer: b'OK 1"):
        call()


@pytest.mark.parametrize("extra, starts", [(" --version 1", 1), (" --version 1 --strict", 2)])
def test_a_version_1_harness_is_judged(extra, starts):
    """A harness that answers the version-2 greeting with version 1 is spoken to in version 1; one
    that exits at it (written strictly for version 1) is started once more and greeted with 1."""
    impl = judged(extra=extra)
    assert impl.module.HARNESS.version == 1 and impl.module.HARNESS.starts == starts
    assert np.array_equal(impl("top_p", X, P, 0), gpu_impl.top_p(X, P, 0))


@pytest.mark.parametrize("mode, starts, says", [("bad", 1, "got 'HELLO'"), ("exit", 2, "status 2"),
                                                ("hang", 1, "no answer within the handshake's timeout")])
def test_a_failed_handshake_is_given_up_at_once(mode, starts, says):
    t0 = time.monotonic()
    impl = judged(extra=f" --handshake {mode}")
    h = impl.module.HARNESS
    assert time.monotonic() - t0 <= (TIMEOUT_S if mode == "hang" else 0) + FAST_S  # LOGITCHECK_EXEC_TIMEOUT
    assert impl.has("top_p") and impl.has("typical")  # a broken harness "implements" everything
    t0 = time.monotonic()
    for fn, args in [("top_p", (X, P, 0)), ("softmax", (X,)), ("typical", (X, P))] * 3:
        with pytest.raises(HarnessGivenUp, match=f"^harness unusable: handshake with .* failed: .*{says}"):
            impl(fn, *args)
    assert time.monotonic() - t0 < 0.5 and h.starts == starts  # never retried


def test_a_harness_that_cannot_start_is_given_up():
    broken = load_impl("x", "numpy", exec_module("/nonexistent/harness"))
    with pytest.raises(HarnessGivenUp, match="harness unusable: handshake .* failed: the process exited"):
        broken("softmax", X)
    assert broken.module.HARNESS.starts == 2  # the greeting of version 1 tried once


def test_stderr_is_kept_as_a_ring():
    impl = judged("chatty")
    h = impl.module.HARNESS
    out, wall, peak = measured(lambda: [impl("top_p", X, P, 0) for _ in range(4)])
    assert not isinstance(out, Exception), out
    assert h.stderr.total >= 3 * 8 << 20 and len(h.stderr.data) <= STDERR_KEEP
    assert peak <= memory_bound("top_p", ARGS)


def test_the_harness_is_ended_with_the_judge():
    """close(): QUIT and end of input, then SIGTERM, then SIGKILL, so a harness that ignores all
    three still ends; a judge that exits without closing ends it too (atexit)."""
    impl = judged("ignore_eof")
    impl("softmax", X)
    proc = impl.module.HARNESS.proc
    t0 = time.monotonic()
    impl.module.HARNESS.close(grace_s=0.5)
    assert proc.poll() is not None and time.monotonic() - t0 <= 0.5 * 2 + FAST_S
    script = ("import sys; from properties.protocol.harness import exec_module; "
              f"m = exec_module(sys.argv[1]); print(m.HARNESS.proc.pid, flush=True)")
    judge = subprocess.run([sys.executable, "-c", script, f"exec {HARNESS} --fault ignore_eof --on top_p"],
                           capture_output=True, text=True, timeout=60)
    pid = int(judge.stdout.split()[0])
    time.sleep(0.5)
    try:
        state = open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0]
    except OSError:
        state = "gone"
    if state not in ("gone", "Z"):
        os.kill(pid, 9)
    assert state in ("gone", "Z"), f"the harness outlived its judge (state {state})"
