"""A harness process spoken to over the protocol (docs/protocol.md), and the module-like view of
it that ``--impl exec:CMD`` judges.

One process per test process (each xdist worker starts its own). A fault (crash, hang, malformed
or short frame, a result of the wrong shape or dtype) raises ``HarnessFault`` naming the call and
its arguments; the process is killed and the next call starts a new one, so the run goes on."""
from __future__ import annotations

import os
import select
import shlex
import signal
import subprocess
import tempfile
import time
import types
from typing import Any, Callable

import numpy as np

from properties.backends import CaseNotCarried, HarnessFault
from properties.protocol import framing
from properties.protocol.signatures import PARTS, argument_names, check_results

DEFAULT_TIMEOUT_S = 120.0
HANDSHAKE_TIMEOUT_S = 30.0


class HarnessUnsupported(Exception):
    """The harness answered ``ERROR unsupported``: NOT COVERED for that case."""


def timeout_s() -> float:
    return float(os.environ.get("LOGITCHECK_EXEC_TIMEOUT", DEFAULT_TIMEOUT_S))


PIPE_BYTES = 1 << 20


def _widen_pipe(fd: int) -> None:
    """Ask Linux for a 1 MiB pipe buffer (the default 64 KiB makes a 1 MiB row 16 hand-overs
    between the processes); elsewhere, or past the system's limit, the default stays."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)
    except (OSError, ImportError, ValueError):
        pass


class _Reported(HarnessFault):
    """``ERROR failed``: the harness reported its own failure and is still in step: no restart."""


class _Pipe:
    """Buffered reads and writes on the process's pipes with a deadline (select + os.read)."""

    def __init__(self, proc: subprocess.Popen, deadline: float) -> None:
        self.proc, self.deadline, self.buf = proc, deadline, bytearray()

    def _wait(self, fd: int, write: bool) -> None:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        r, w, _ = select.select([] if write else [fd], [fd] if write else [], [], left)
        if not (r or w):
            raise TimeoutError

    def write(self, data: bytes | memoryview) -> None:
        fd, view = self.proc.stdin.fileno(), memoryview(data).cast("B")
        while view:
            self._wait(fd, write=True)
            try:
                n = os.write(fd, view[:PIPE_BYTES])
            except BlockingIOError:
                continue
            view = view[n:]

    def _fill(self) -> bool:
        fd = self.proc.stdout.fileno()
        self._wait(fd, write=False)
        chunk = os.read(fd, 4 * PIPE_BYTES)
        self.buf += chunk
        return bool(chunk)

    def readline(self, limit: int = framing.MAX_HEADER + 1) -> bytes:
        while True:
            i = self.buf.find(b"\n", 0, limit)
            if i >= 0:
                line = bytes(self.buf[:i + 1])
                del self.buf[:i + 1]
                return line
            if len(self.buf) >= limit or not self._fill():
                line = bytes(self.buf[:limit])
                del self.buf[:limit]
                return line

    def read(self, n: int) -> bytearray:
        """n bytes (fewer only at end of stream): what is buffered, then the rest read straight
        into the result (a payload of megabytes is copied once, not appended chunk by chunk)."""
        have = min(n, len(self.buf))
        out = bytearray(n)
        out[:have] = self.buf[:have]
        del self.buf[:have]
        view, got, fd = memoryview(out), have, self.proc.stdout.fileno()
        while got < n:
            self._wait(fd, write=False)
            k = os.readv(fd, [view[got:]])
            if not k:
                break
            got += k
        return out if got == n else out[:got]


class Harness:
    """The engine's harness process: handshake, calls, restarts."""

    def __init__(self, command: str) -> None:
        self.command = command
        self.proc: subprocess.Popen | None = None
        self.name = ""
        self.functions: frozenset[str] = frozenset()
        self.claims: tuple[str, ...] = ()
        self.stderr = tempfile.TemporaryFile()
        self.restarts = 0
        self.broken: str | None = None
        self._start()

    # --- process --------------------------------------------------------------------------
    def _start(self) -> None:
        self.stderr.seek(0)
        self.stderr.truncate()
        try:
            self.proc = subprocess.Popen(["sh", "-c", self.command], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=self.stderr, start_new_session=True)
        except OSError as exc:
            self.broken = f"cannot start {self.command!r}: {exc}"
            return
        os.set_blocking(self.proc.stdin.fileno(), False)
        for fd in (self.proc.stdin.fileno(), self.proc.stdout.fileno()):
            _widen_pipe(fd)
        try:
            self._handshake()
            self.broken = None
        except (TimeoutError, EOFError, framing.FrameError, OSError, ValueError) as exc:
            self.broken = f"handshake with {self.command!r} failed: {self._why(exc)}"
            self._kill()

    def _handshake(self) -> None:
        pipe = _Pipe(self.proc, time.monotonic() + HANDSHAKE_TIMEOUT_S)
        pipe.write(f"LOGITCHECK {framing.VERSION}\n".encode())
        first = self._line(pipe).split(" ", 2)
        if first[:2] != ["LOGITCHECK", str(framing.VERSION)]:
            raise ValueError(f"expected 'LOGITCHECK {framing.VERSION} <name>', got {' '.join(first)[:120]!r}")
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

    def _line(self, pipe: _Pipe) -> str:
        line = pipe.readline()
        if not line:
            raise EOFError("the harness closed its output")
        if not line.endswith(b"\n"):
            raise framing.FrameError("short" if len(line) <= framing.MAX_HEADER else "malformed",
                                     f"an unterminated header line {line[:80]!r}")
        try:
            return line[:-1].decode("ascii")
        except UnicodeDecodeError:
            raise framing.FrameError("malformed", f"a header line that is not ASCII: {line[:80]!r}") from None

    def _kill(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            pass
        self.proc = None

    def _stderr_tail(self, n: int = 800) -> str:
        self.stderr.seek(0)
        text = self.stderr.read().decode("utf-8", errors="replace").strip()
        return ("; stderr: ..." + text[-n:]) if len(text) > n else (f"; stderr: {text}" if text else "")

    def _why(self, exc: BaseException) -> str:
        if isinstance(exc, TimeoutError):
            return "no answer in time"
        if isinstance(exc, EOFError) or isinstance(exc, (BrokenPipeError, ConnectionResetError)):
            code = self.proc.wait(timeout=5) if self.proc else None
            return f"the process exited (status {code}){self._stderr_tail()}"
        return str(exc)

    def close(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                _Pipe(self.proc, time.monotonic() + 2).write(b"QUIT\n")
                self.proc.wait(timeout=2)
            except (OSError, TimeoutError, subprocess.TimeoutExpired):
                pass
        self._kill()

    # --- calls ----------------------------------------------------------------------------
    def call(self, function: str, args: list[tuple[str, Any]]) -> Any:
        """One call: its results (one array, or a tuple of them), ValueError for ``refused``,
        ``HarnessUnsupported``, or ``HarnessFault`` after which the process is restarted."""
        if self.proc is None or self.proc.poll() is not None:
            if self.proc is not None:
                self._kill()
            self.restarts += 1
            self._start()
        what = f"{function}({framing.describe_args(args)})"
        if self.broken:
            raise HarnessFault(f"harness unusable: {self.broken}; call {what}")
        try:
            return self._exchange(function, args, what)
        except _Reported:
            raise
        except HarnessFault:
            self._kill()
            raise
        except TimeoutError:
            self._kill()
            raise HarnessFault(f"harness hung: no complete answer to {what} within {timeout_s():g} s "
                               f"(LOGITCHECK_EXEC_TIMEOUT){self._stderr_tail()}") from None
        except (EOFError, BrokenPipeError, ConnectionResetError, OSError) as exc:
            why = self._why(exc if not isinstance(exc, OSError) or isinstance(exc, (BrokenPipeError, ConnectionResetError))
                            else EOFError())
            self._kill()
            raise HarnessFault(f"harness crashed during {what}: {why}") from None
        except framing.FrameError as exc:
            self._kill()
            raise HarnessFault(f"harness sent a {exc.kind} frame answering {what}: {exc}{self._stderr_tail()}") from None

    def _exchange(self, function: str, args: list[tuple[str, Any]], what: str) -> Any:
        try:
            request = framing.encode_call(function, args)
        except TypeError as exc:  # e.g. complex logits: a case no harness can be asked
            raise CaseNotCarried(f"{function}: {exc}: the protocol cannot put this case to a harness") from None
        pipe = _Pipe(self.proc, time.monotonic() + timeout_s())
        for part in request:
            pipe.write(part)
        head = self._line(pipe).split(" ", 2)
        if head[0] == "ERROR":
            kind, message = (head[1] if len(head) > 1 else ""), (head[2] if len(head) > 2 else "")
            if kind == "refused":
                raise ValueError(f"{self.name} refused {function}: {message}")
            if kind == "unsupported":
                raise HarnessUnsupported(f"{self.name} does not support this case of {function}: {message}")
            if kind == "failed":
                raise _Reported(f"harness reported a failure in {what}: {message}")
            raise framing.FrameError("malformed", f"unknown ERROR kind {kind!r}")
        if head[0] != "OK" or len(head) != 2 or not head[1].isdigit():
            raise framing.FrameError("malformed", f"expected 'OK <n>' or 'ERROR <kind> <message>', got "
                                                  f"{' '.join(head)[:120]!r}")
        n = int(head[1])
        if not 1 <= n <= 8:
            raise framing.FrameError("malformed", f"OK announces {n} results (1 to 8 allowed)")
        results = []
        for _ in range(n):
            code, dims = framing.parse_array_header(self._line(pipe).split(" "), "RESULT")
            need = int(np.prod(dims, dtype=np.int64)) * framing.DTYPES[code].itemsize
            data = pipe.read(need)
            if len(data) != need:
                if self.proc.poll() is not None or len(data) < need:
                    raise framing.FrameError("short", f"a {code}{list(dims)} result announced {need} bytes, "
                                                      f"{len(data)} arrived")
            results.append(_decode(code, dims, data))
        wrong = check_results(function, dict(args), results)
        if wrong:
            raise HarnessFault(f"harness answered with the wrong shape/dtype for {what}: {wrong}")
        return results[0] if n == 1 else tuple(results)


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
