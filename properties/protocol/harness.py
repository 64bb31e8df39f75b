"""A harness process spoken to over the protocol (docs/protocol.md), and the module-like view of
it that ``--impl exec:CMD`` judges.

One process per test process (each xdist worker starts its own), spoken to in version 2 (call
ids echoed) or 1. A fault (crash, hang, malformed or short frame, a result of the wrong shape or
dtype, an answer to another call, bytes outside an answer) raises ``HarnessFault`` naming the call
and its arguments; the process is killed and the next call starts a new one, so the run goes on,
up to ``FAULTS_IN_A_ROW`` per test. A failed handshake gives the harness up. The judge's memory
per call is bounded (``memory_bound``) and the harness is ended when the judge exits."""
from __future__ import annotations

import atexit
import os
import shlex
import signal
import subprocess
import types
from typing import Any, Callable

import numpy as np

from properties.backends import CaseNotCarried, HarnessFault
from properties.protocol import framing
from properties.protocol.pipes import READ_CHUNK, STDERR_KEEP, Pipe, StderrRing, widen_pipe
from properties.protocol.signatures import (PARTS, argument_names, check_header, check_results, element_cap,
                                            expected_results)

DEFAULT_TIMEOUT_S = 120.0
FAULTS_IN_A_ROW = 3
"""Faults in a row (no answered call between) after which the rest of that test's calls fail at
once with the first of them, unsent; the next test starts a fresh process (and, after a test
given up, gives up at its first fault). A hang counts as all three: it has already cost a whole
timeout. Without this a harness that faults on every call is restarted for every example and
every shrink step hypothesis tries."""


class HarnessGivenUp(BaseException):
    """The harness faulted ``FAULTS_IN_A_ROW`` times in a row in this test: the test fails now,
    with the first of those faults. A BaseException, so that hypothesis does not go on shrinking
    and explaining a failure whose every example fails at once (each a whole draw of logits, for
    nothing: minutes per test on a harness that faults on every call); pytest fails the test."""


class HarnessUnsupported(Exception):
    """The harness answered ``ERROR unsupported``: NOT COVERED for that case."""


def timeout_s() -> float:
    """Seconds a harness has for its handshake and for each answer (``LOGITCHECK_EXEC_TIMEOUT``)."""
    return float(os.environ.get("LOGITCHECK_EXEC_TIMEOUT", DEFAULT_TIMEOUT_S))


def memory_bound(function: str, args: list[tuple[str, Any]]) -> int:
    """Bytes the judge may hold for one call beyond its arguments, whatever the harness does:
    the results the call is due (their expected size; a result whose shape the arguments do not
    fix, at most ``element_cap`` 8-byte elements), one read chunk, the stderr ring with one
    drained chunk, a header line, and 256 KiB for the judge's own objects (a restart's process
    and pipes, the fault's message). Announced sizes are checked before anything is allocated."""
    kwargs = dict(args)
    due = 0
    for w in expected_results(function, kwargs):
        due += (int(np.prod(w.shape)) * 8) if w.shape is not None else element_cap(kwargs) * 8
    return due + READ_CHUNK + 2 * STDERR_KEEP + framing.MAX_HEADER + (64 << 10) + (256 << 10)


def current_test() -> str | None:
    """The node id of the test pytest is running in this process, or None outside a test:
    the unit of the restart policy (pytest sets PYTEST_CURRENT_TEST to "<nodeid> (<phase>)")."""
    value = os.environ.get("PYTEST_CURRENT_TEST")
    return value.rsplit(" (", 1)[0] if value else None


class _Reported(HarnessFault):
    """``ERROR failed``: the harness reported its own failure and is still in step: no restart."""


class _NoGreeting(Exception):
    """The process ended its output at the greeting: a harness written for an older version."""


class Harness:
    """The engine's harness process: handshake, calls, restarts, and its end."""

    def __init__(self, command: str) -> None:
        self.command = command
        self.proc: subprocess.Popen | None = None
        self.pipe: Pipe | None = None
        self.stderr: StderrRing | None = None
        self.name, self.version = "", 0
        self.functions: frozenset[str] = frozenset()
        self.claims: tuple[str, ...] = ()
        self.starts = self.restarts = 0
        self.broken: str | None = None
        """Why the handshake failed: the harness is given up and every call fails with this."""
        self.next_id = 1
        self.last_answered = ""
        self._test: str | None = None
        self._in_a_row = 0
        self._given_up: str | None = None
        self._answered: str | None = None
        """How far the current answer came (None before its first line): for short-frame messages."""
        self._start()
        atexit.register(self.close)

    # --- process --------------------------------------------------------------------------
    def _spawn(self) -> None:
        self.starts += 1
        self.proc = subprocess.Popen(["sh", "-c", self.command], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, start_new_session=True)
        self.stderr = StderrRing(os.dup(self.proc.stderr.fileno()))
        self.proc.stderr.close()
        os.set_blocking(self.proc.stdin.fileno(), False)
        for fd in (self.proc.stdin.fileno(), self.proc.stdout.fileno()):
            widen_pipe(fd)
        self.pipe = Pipe(self.proc)

    def _start(self) -> None:
        for offer in range(framing.VERSION, 0, -1):
            try:
                self._spawn()
            except OSError as exc:
                self.broken = f"cannot start {self.command!r}: {exc}"
                return
            try:
                self._handshake(offer)
                return
            except _NoGreeting:
                self._kill()  # a strict older harness exits at a greeting it does not know
            except (TimeoutError, EOFError, framing.FrameError, OSError, ValueError) as exc:
                why = "no answer within the handshake's timeout" if isinstance(exc, TimeoutError) else \
                    self._exit_why() if isinstance(exc, (EOFError, BrokenPipeError)) else str(exc)
                self.broken = f"handshake with {self.command!r} failed: {why}{self._tail()}"
                self._kill()
                return

    def _handshake(self, offer: int) -> None:
        pipe = self.pipe.until(timeout_s())
        try:
            pipe.write(f"LOGITCHECK {offer}\n".encode())
            first = self._line(pipe).split(" ", 2)
        except (EOFError, BrokenPipeError):
            if offer > 1 and self._exited(1.0):
                raise _NoGreeting from None
            raise
        if first[0] != "LOGITCHECK" or len(first) < 2 or not first[1].isdigit() or not 1 <= int(first[1]) <= offer:
            raise ValueError(f"expected 'LOGITCHECK {offer} <name>' (or an older version), got {' '.join(first)[:120]!r}")
        self.version = int(first[1])
        self.name = first[2] if len(first) > 2 else "harness"
        functions, claims = set(), []
        while True:
            fields = self._line(pipe).split()
            if fields == ["END"]:
                break
            if len(fields) == 2 and fields[0] == "FUNCTION":
                functions.add(fields[1])
            elif len(fields) == 2 and fields[0] == "CLAIM":
                claims.append(fields[1])
            else:
                raise ValueError(f"unexpected handshake line {' '.join(fields)[:120]!r}")
        self.functions, self.claims = frozenset(functions), tuple(claims)
        self.last_answered = "the handshake"

    def _line(self, pipe: Pipe) -> str:
        line = pipe.readline(framing.MAX_HEADER + 1)
        if not line:
            raise EOFError("the harness closed its output")
        if not line.endswith(b"\n"):
            if len(line) <= framing.MAX_HEADER:
                raise EOFError(f"the stream ended inside a header line {line[:80]!r}")
            raise framing.FrameError("malformed", f"a header line longer than {framing.MAX_HEADER} bytes")
        try:
            return line[:-1].decode("ascii")
        except UnicodeDecodeError:
            raise framing.FrameError("malformed", f"a header line that is not ASCII: {line[:80]!r}") from None

    def _exited(self, wait_s: float) -> bool:
        try:
            self.proc.wait(timeout=wait_s)
            return True
        except subprocess.TimeoutExpired:
            return False

    def _exit_why(self) -> str:
        """After the output ended: the exit status, or that the process lives on without output
        (it is killed; never waited for without a bound)."""
        if self.proc is None:
            return "the process is gone"
        if self._exited(0.5):
            return f"the process exited (status {self.proc.returncode})"
        return "the harness closed its output but kept running (killed)"

    def _tail(self) -> str:
        if self.stderr is None:
            return ""
        settle = 0.5 if self.proc is not None and self.proc.poll() is not None else 0.0
        return self.stderr.tail(settle_s=settle)

    def _kill(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None:
            return
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # the whole group: sh and what it started
        except (ProcessLookupError, PermissionError):
            pass
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        for f in (proc.stdin, proc.stdout):
            try:
                f.close()
            except OSError:
                pass

    def close(self, grace_s: float = 1.0) -> None:
        """End the harness: QUIT and end of input, then SIGTERM, then SIGKILL to its process
        group, ``grace_s`` apart; nothing it started outlives the judge."""
        proc = self.proc
        if proc is not None and proc.poll() is None:
            try:
                self.pipe.until(grace_s).write(b"QUIT\n")
            except (OSError, TimeoutError):
                pass
            try:
                proc.stdin.close()
            except OSError:
                pass
            for sig in (None, signal.SIGTERM):
                if sig is not None:
                    try:
                        os.killpg(proc.pid, sig)
                    except (ProcessLookupError, PermissionError):
                        pass
                try:
                    proc.wait(timeout=grace_s)
                    break
                except subprocess.TimeoutExpired:
                    continue
        self._kill()

    # --- calls ----------------------------------------------------------------------------
    def _enter_test(self) -> None:
        """A new test gets a new process, but a harness given up in the test before gets one try:
        its first fault gives up again (a harness that faults on every call costs one start per
        test, not ``FAULTS_IN_A_ROW``)."""
        test = current_test()
        if test != self._test:
            self._in_a_row = FAULTS_IN_A_ROW - 1 if self._given_up is not None else 0
            self._test, self._given_up = test, None

    def _fault(self, message: str, hang: bool = False) -> HarnessFault:
        """A fault of the harness on this call: the process is killed (restarted at the next
        call) and the restart policy counts it."""
        self._kill()
        self._in_a_row = FAULTS_IN_A_ROW if hang else self._in_a_row + 1
        if self._test is not None and self._in_a_row >= FAULTS_IN_A_ROW and self._given_up is None:
            self._given_up = message
        return HarnessFault(message)

    def call(self, function: str, args: list[tuple[str, Any]]) -> Any:
        """One call: its results (one array, or a tuple of them), ValueError for ``refused``,
        ``HarnessUnsupported``, or ``HarnessFault`` after which the process is restarted.

        Every fault leaves from the one ``raise`` below, outside any ``except``: hypothesis tells
        failures apart by where they were raised (and what they were raised while handling), so
        a fault met on a first example and the same fault given up on at its replay are one
        failure, not a FlakyFailure."""
        if self.broken:  # given up for the run: every test that calls it fails at once, unshrunk
            raise HarnessGivenUp(f"harness unusable: {self.broken}; call {function}(...) not sent")
        self._enter_test()
        if self._given_up is not None:
            raise HarnessGivenUp(f"{self._given_up} [then {function}(...) was not sent: the harness faulted on "
                                 f"{self._in_a_row} call(s) in a row in this test; a new one starts at the next test]")
        try:
            return self._call(function, args)
        except HarnessFault as exc:
            fault = exc
        raise type(fault)(str(fault))

    def _call(self, function: str, args: list[tuple[str, Any]]) -> Any:
        what = f"{function}({framing.describe_args(args)})"
        if self.broken:
            raise HarnessFault(f"harness unusable: {self.broken}; call {what} not sent")
        if self.proc is None or self.proc.poll() is not None:
            if self.proc is not None:
                self._kill()  # it ended between calls
            self.restarts += 1
            self._start()
            if self.broken:
                raise HarnessFault(f"harness unusable: {self.broken}; call {what} not sent")
        self._answered = None
        try:
            out = self._exchange(function, args, what)
        except (_Reported, HarnessFault, ValueError, HarnessUnsupported, CaseNotCarried):
            raise
        except TimeoutError:
            if self._answered:
                raise self._fault(f"harness sent a short frame answering {what}: {self._answered}, then nothing "
                                  f"within {timeout_s():g} s (LOGITCHECK_EXEC_TIMEOUT; the process was still running)"
                                  f"{self._tail()}", hang=True) from None
            raise self._fault(f"harness hung: no complete answer to {what} within {timeout_s():g} s "
                              f"(LOGITCHECK_EXEC_TIMEOUT){self._tail()}", hang=True) from None
        except (EOFError, OSError) as exc:
            why = self._exit_why()
            if self._answered:
                raise self._fault(f"harness sent a short frame answering {what}: {self._answered}, then {why}"
                                  f"{self._tail()}") from None
            raise self._fault(f"harness crashed during {what}: {why}{self._tail()}") from None
        except framing.FrameError as exc:
            raise self._fault(f"harness sent a {exc.kind} frame answering {what}: {exc}{self._tail()}") from None
        self._in_a_row = 0
        self.last_answered = what
        return out

    def _exchange(self, function: str, args: list[tuple[str, Any]], what: str) -> Any:
        call_id = self.next_id if self.version >= 2 else None
        try:
            request = framing.encode_call(function, args, call_id)
        except TypeError as exc:  # e.g. complex logits: a case no harness can be asked
            raise CaseNotCarried(f"{function}: {exc}: the protocol cannot put this case to a harness") from None
        self.next_id += 1
        pipe = self.pipe.until(timeout_s())
        stray = pipe.stray()
        if stray == b"":
            raise EOFError("the harness closed its output between calls")
        if stray is not None:
            raise self._fault(f"harness sent bytes outside an answer: {stray!r} after its answer to "
                              f"{self.last_answered}, before {what} was sent")
        for part in request:
            pipe.write(part)
        tag, _, rest = self._line(pipe).partition(" ")
        self._answered = f"{tag} line"
        if call_id is not None and tag in ("OK", "ERROR"):
            got, _, rest = rest.partition(" ")
            if got != str(call_id):
                raise self._fault(f"harness answered the wrong call: {tag} for call id {got!r} while {call_id} "
                                  f"({what}) was due: a stale, repeated or skipped answer")
        if tag == "ERROR":
            kind, _, message = rest.partition(" ")
            self._check_quiet(pipe, what)
            if kind == "refused":
                raise ValueError(f"{self.name} refused {function}: {message}")
            if kind == "unsupported":
                raise HarnessUnsupported(f"{self.name} does not support this case of {function}: {message}")
            if kind == "failed":
                raise _Reported(f"harness reported a failure in {what}: {message}")
            raise framing.FrameError("malformed", f"unknown ERROR kind {kind!r}")
        if tag != "OK" or not rest.isdigit():
            raise framing.FrameError("malformed", f"expected 'OK <n>' or 'ERROR <kind> <message>'"
                                                  f"{' with the call id' if call_id else ''}, got {tag} {rest[:100]!r}")
        n, kwargs = int(rest), dict(args)
        if not 1 <= n <= 8:
            raise framing.FrameError("malformed", f"OK announces {n} results (1 to 8 allowed)")
        want = expected_results(function, kwargs)
        if n != len(want):
            raise self._fault(f"harness answered with the wrong shape/dtype for {what}: {n} result(s), "
                              f"{function} returns {len(want)}")
        results = []
        for i, w in enumerate(want):
            code, dims = framing.parse_array_header(self._line(pipe).split(" "), "RESULT")
            wrong = check_header(w, code, dims, kwargs)
            if wrong:
                raise self._fault(f"harness answered with the wrong shape/dtype for {what}: result {i} is {wrong}")
            data = bytearray(int(np.prod(dims, dtype=np.int64)) * framing.DTYPES[code].itemsize)
            self._answered = f"result {i} ({code}{list(dims)}) announced {len(data)} bytes"
            try:
                got = pipe.read_into(data)
            except TimeoutError:
                self._answered += f", {pipe.got} arrived"
                raise
            if got < len(data):
                self._answered += f", {pipe.got} arrived"
                raise EOFError
            self._answered += f", {len(data)} arrived"
            results.append(_decode(code, dims, data))
        wrong = check_results(function, kwargs, results)
        if wrong:
            raise self._fault(f"harness answered with the wrong shape/dtype for {what}: {wrong}")
        self._check_quiet(pipe, what)
        return results[0] if n == 1 else tuple(results)

    def _check_quiet(self, pipe: Pipe, what: str) -> None:
        """Nothing may follow an answer: extra bytes mean the stream is out of step."""
        stray = pipe.stray()
        if stray:
            raise self._fault(f"harness sent bytes outside an answer: {stray!r} after its answer to {what}")


def _decode(code: str, dims: tuple[int, ...], data: bytes) -> Any:
    if code == "str":
        return data.decode("utf-8", errors="replace")
    dt = framing.DTYPES[code]
    a = np.frombuffer(data, dtype=dt).reshape(dims)
    return a if dt.isnative else a.astype(dt.newbyteorder("="))


def _proxy(harness: Harness, qualified: str) -> Callable[..., Any]:
    names = argument_names(qualified)

    def call(*args: Any, **kwargs: Any) -> Any:
        if len(args) > len(names):
            raise TypeError(f"{qualified} takes at most {len(names)} positional arguments")
        pairs = [(n, a) for n, a in zip(names, args)] + list(kwargs.items())
        pairs = [(n, v.get() if hasattr(v, "get") and not isinstance(v, dict) else v) for n, v in pairs if v is not None]
        return harness.call(qualified, pairs)
    call.__name__ = qualified
    return call


def exec_module(command: str) -> types.ModuleType:
    """A module-like namespace for ``--impl exec:CMD``: one attribute per function the harness
    implements (its sub-APIs as ``.ops``, ``.quants``, ``.engines``), ``LOGITCHECK_CLAIMS`` from
    the handshake. A harness whose handshake failed implements everything, so every call fails
    saying why (a broken harness must not pass as a partial one)."""
    harness = Harness(command)
    name = f"exec:{command}"
    top = types.ModuleType(name)
    top.HARNESS = harness
    top.LOGITCHECK_CLAIMS = harness.claims
    subs = {part: types.ModuleType(f"{name}.{part}") for part in PARTS}
    for part, mod in subs.items():
        mod.LOGITCHECK_CLAIMS = harness.claims
        setattr(top, part, mod)
    listed = harness.functions if not harness.broken else frozenset(_all_functions())
    for qualified in listed:
        part, _, fn = qualified.rpartition(".")
        target = subs.get(part) if part else top
        if target is not None and fn:
            setattr(target, fn, _proxy(harness, qualified))
    return top


def _all_functions() -> list[str]:
    from properties.protocol.signatures import table
    return [row.qualified for row in table()]


def parse_command(spec: str) -> str | None:
    """The command of an ``exec:CMD`` impl spec, or None for a module name."""
    if not spec.startswith("exec:"):
        return None
    command = spec[len("exec:"):].strip()
    if not command:
        raise ValueError("--impl exec: needs a command, e.g. --impl 'exec:./build/harness'")
    shlex.split(command)  # a ValueError here names an unbalanced quote
    return command
