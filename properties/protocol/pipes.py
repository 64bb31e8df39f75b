"""The harness process's pipes: reads and writes with a deadline, and stderr kept as a ring.

Everything the judge holds for a harness is bounded here: the read buffer (one header line, or
one chunk of a result it has already agreed to receive) and the stderr ring (``STDERR_KEEP``
bytes, whatever the harness writes)."""
from __future__ import annotations

import os
import select
import subprocess
import threading
import time

PIPE_BYTES = 1 << 20
READ_CHUNK = 1 << 20
"""Bytes asked of the pipe per read while looking for a header line: what the judge may hold
beyond an expected result at any time."""
STDERR_KEEP = 64 << 10
"""Bytes of the harness's stderr kept: the newest, for the fault messages' tail."""


def widen_pipe(fd: int) -> None:
    """Ask Linux for a 1 MiB pipe buffer (the default 64 KiB makes a 1 MiB row 16 hand-overs
    between the processes); elsewhere, or past the system's limit, the default stays."""
    try:
        import fcntl

        fcntl.fcntl(fd, getattr(fcntl, "F_SETPIPE_SZ", 1031), PIPE_BYTES)
    except (OSError, ImportError, ValueError):
        pass


class StderrRing:
    """Drains a pipe on a thread (a harness blocked on a full stderr pipe would look hung) and
    keeps its last ``STDERR_KEEP`` bytes."""

    def __init__(self, fd: int, keep: int = STDERR_KEEP) -> None:
        self.keep, self.data, self.total = keep, bytearray(), 0
        self._lock = threading.Lock()
        self._thread = threading.Thread(target=self._drain, args=(fd,), daemon=True)
        self._thread.start()

    def _drain(self, fd: int) -> None:
        try:
            while True:
                chunk = os.read(fd, 64 << 10)
                if not chunk:
                    return
                with self._lock:
                    self.total += len(chunk)
                    self.data += chunk
                    if len(self.data) > self.keep:
                        del self.data[:len(self.data) - self.keep]
        except OSError:
            return
        finally:
            try:
                os.close(fd)
            except OSError:
                pass

    def tail(self, n: int = 800, settle_s: float = 0.0) -> str:
        """``; stderr: ...`` with the last ``n`` characters, or ''. ``settle_s``: wait that long
        for the drain to reach the end (after the process died: its last words)."""
        if settle_s:
            self._thread.join(settle_s)
        with self._lock:
            text = bytes(self.data[-4 * n:]).decode("utf-8", errors="replace").strip()
        if not text:
            return ""
        cut = len(text) > n or self.total > len(self.data)
        return "; stderr: " + ("..." + text[-n:] if cut else text)


class Pipe:
    """Buffered reads and writes on a process's stdin/stdout with a deadline (select + os.read).
    One per process: bytes read past an answer stay in ``buf`` and are seen by ``stray``."""

    def __init__(self, proc: subprocess.Popen) -> None:
        self.proc, self.deadline, self.buf = proc, 0.0, bytearray()
        self.eof = False

    def until(self, seconds: float) -> "Pipe":
        self.deadline = time.monotonic() + seconds
        return self

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
        chunk = os.read(fd, READ_CHUNK)
        self.buf += chunk
        self.eof = not chunk
        return bool(chunk)

    def readline(self, limit: int) -> bytes:
        """One line with its newline; fewer bytes, no newline, at end of stream or past ``limit``."""
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

    def read_into(self, out: bytearray) -> int:
        """Fill ``out`` (already sized to the announced, checked length): what is buffered, then
        the rest read straight into it; returns the bytes that arrived (fewer only at EOF;
        TimeoutError if the harness stops sending, with ``self.got`` telling how far it came)."""
        n = len(out)
        have = min(n, len(self.buf))
        out[:have] = self.buf[:have]
        del self.buf[:have]
        view, self.got, fd = memoryview(out), have, self.proc.stdout.fileno()
        while self.got < n:
            self._wait(fd, write=False)
            k = os.readv(fd, [view[self.got:]])
            if not k:
                self.eof = True
                break
            self.got += k
        return self.got

    def stray(self, peek: int = 80) -> bytes | None:
        """Bytes that arrived outside an answer (buffered, or waiting in the pipe right now), at
        most ``peek`` of them; b'' if the stream is at its end; None if nothing is there."""
        if self.buf:
            return bytes(self.buf[:peek])
        fd = self.proc.stdout.fileno()
        r, _, _ = select.select([fd], [], [], 0)
        if not r:
            return None
        chunk = os.read(fd, READ_CHUNK)
        self.buf += chunk
        self.eof = not chunk
        return bytes(chunk[:peek])
