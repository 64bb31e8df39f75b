"""A harness written in Python over the protocol, for the protocol's own tests: it serves a
module with gpu_impl's API (default gpu_impl), speaks version 2 (or ``--version 1``; with
``--strict`` it exits at any other greeting, as a harness written for version 1 may), and can be
told to misbehave on one function (``--on NAME``, or ``--on all`` for every call) with
``--fault MODE``, one of ``FAULTS`` — so each fault can be shown to be reported and survived.

It reads only framing's version-1 helpers, so a judge from before version 2 can drive it too
(for old -> new measurements)."""
from __future__ import annotations

import argparse
import importlib
import os
import signal
import sys
import time

import numpy as np

from properties.protocol import framing

NEWEST = 2
CODES = {np.dtype("float32"): "f32", np.dtype("float64"): "f64", np.dtype("int64"): "i64", np.dtype("int32"): "i32"}
FAULTS = {
    "crash": "exit with status 139 on reading the call",
    "hang": "never answer (sleep)",
    "malformed": "answer 'OK two'",
    "short": "the right RESULT header, 12 bytes of its payload, exit",
    "short_wait": "the right RESULT header, 12 bytes of its payload, stay alive and silent",
    "wrong_shape": "drop the last element of result 0",
    "wrong_dtype": "ids as f32, floats as i64",
    "f64": "float results as f64 (right values, wrong width)",
    "nan": "a NaN at the first finite element of every float result",
    "trailing": "extra bytes in the same write after the answer",
    "late_duplicate": "the answer again, 0.3 s later",
    "chatty": "8 MiB to stderr per call, then a correct answer",
    "chatty_crash": "64 MiB to stderr, then exit",
    "huge_1g": "announce a result of 2^28 f32 (1 GiB), send nothing, stay alive",
    "huge_64g": "announce a result of 2^34 f32 (64 GiB), send nothing, stay alive",
    "close_stdout": "close stdout and stay alive",
    "ignore_eof": "answer correctly, but ignore QUIT, end of input and SIGTERM at the end",
    "refused": "ERROR refused", "unsupported": "ERROR unsupported", "failed": "ERROR failed",
}
"""Call faults, by mode. Handshake faults: --handshake bad|hang|exit."""


def _resolve(root, qualified: str):
    part, _, fn = qualified.rpartition(".")
    mod = importlib.import_module(f"{root.__name__}.{part}") if part else root
    return getattr(mod, fn, None)


def _result(a: np.ndarray, code: str | None = None) -> bytes:
    a = np.ascontiguousarray(a)
    code = code or CODES.get(a.dtype, "f32")
    a = a.astype(framing.DTYPES[code])
    dims = " ".join(map(str, a.shape))
    return f"RESULT {code} {a.ndim}{' ' if dims else ''}{dims}\n".encode() + a.tobytes()


def _nan_at_first_finite(a: np.ndarray) -> np.ndarray:
    a = np.array(a, copy=True)
    finite = np.flatnonzero(np.isfinite(a))
    if finite.size:
        a.reshape(-1)[finite[0]] = np.nan
    return a


class Server:
    def __init__(self, module: str, functions: list[str], fault: str | None, on: str | None, version: int) -> None:
        self.root = importlib.import_module(module)
        self.module, self.functions, self.fault, self.on, self.version = module, functions, fault, on, version
        self.inp, self.out = sys.stdin.buffer, sys.stdout.buffer

    def send(self, data: bytes) -> None:
        self.out.write(data)
        self.out.flush()

    def handshake(self, mode: str | None, strict: bool) -> int:
        line = framing.read_line(self.inp).split(" ")
        offered = int(line[1]) if len(line) == 2 and line[0] == "LOGITCHECK" and line[1].isdigit() else 0
        if mode == "exit" or offered < 1 or (strict and offered != self.version):
            sys.stderr.write(f"pyharness: greeting {' '.join(line)!r} not understood\n")
            sys.exit(2)
        if mode == "hang":
            time.sleep(3600)
        version = min(offered, self.version)
        if mode == "bad":
            self.send(b"HELLO\n")
            return version
        head = f"LOGITCHECK {version} python-{self.module}\n" + "".join(f"FUNCTION {f}\n" for f in self.functions)
        self.send(f"{head}END\n".encode())
        return version

    def serve(self, version: int) -> None:
        while True:
            try:
                head = framing.read_line(self.inp).split(" ")
            except EOFError:
                return self.at_end()
            if head[0] == "QUIT":
                return self.at_end()
            call_id = head.pop(1) if version >= 2 else None
            fn, nargs = head[1], int(head[2])
            kwargs = {}
            for _ in range(nargs):
                fields = framing.read_line(self.inp).split(" ")
                code, dims = framing.parse_array_header(["RESULT"] + fields[2:], "RESULT")
                a = framing.read_array(self.inp, code, dims)
                kwargs[fields[1]] = a if isinstance(a, str) or a.ndim else a.item()
            self.answer(fn, kwargs, f" {call_id}" if call_id is not None else "",
                        self.fault if self.on in (fn, "all") else None)

    def answer(self, fn: str, kwargs: dict, cid: str, fault: str | None) -> None:
        if fault == "crash":
            os._exit(139)
        if fault == "hang":
            time.sleep(3600)
        if fault == "close_stdout":
            os.close(1)
            time.sleep(3600)
        if fault == "malformed":
            return self.send(f"OK{cid} two\n".encode())
        if fault in ("huge_1g", "huge_64g"):
            self.send(f"OK{cid} 1\nRESULT f32 1 {1 << (28 if fault == 'huge_1g' else 34)}\n".encode())
            time.sleep(3600)
        if fault in ("refused", "unsupported", "failed"):
            return self.send(f"ERROR{cid} {fault} told to {fault}\n".encode())
        if fault in ("chatty", "chatty_crash"):
            block = (b"pyharness: chatter " * 64)[:1023] + b"\n"
            for _ in range(8 * 1024 if fault == "chatty" else 64 * 1024):
                sys.stderr.buffer.write(block)
            sys.stderr.flush()
            if fault == "chatty_crash":
                os._exit(1)
        try:
            res = _resolve(self.root, fn)(**kwargs)
        except ValueError as exc:
            return self.send(f"ERROR{cid} refused {str(exc).splitlines()[0][:300]}\n".encode())
        res = tuple(np.asarray(r) for r in (res if isinstance(res, tuple) else (res,)))
        codes = [None] * len(res)
        if fault == "wrong_shape":
            res = (res[0].reshape(-1)[:-1],) + res[1:]
        if fault == "wrong_dtype":
            res = (res[0].astype(np.float32) if np.issubdtype(res[0].dtype, np.integer) else
                   res[0].astype(np.int64),) + res[1:]
        if fault == "f64":
            codes = ["f64" if np.issubdtype(r.dtype, np.floating) else None for r in res]
        if fault in ("short", "short_wait"):  # the right header, then 12 bytes of the payload
            whole = _result(res[0])
            self.send(f"OK{cid} {len(res)}\n".encode() + whole[:whole.index(b"\n") + 13])
            if fault == "short":
                os._exit(0)
            time.sleep(3600)
        if fault == "nan":
            res = tuple(_nan_at_first_finite(r) if np.issubdtype(r.dtype, np.floating) else r for r in res)
        answer = f"OK{cid} {len(res)}\n".encode() + b"".join(_result(r, c) for r, c in zip(res, codes))
        self.send(answer + (b"OK 1\nRESULT f32 0\n\0\0\0\0" if fault == "trailing" else b""))
        if fault == "late_duplicate":
            time.sleep(0.3)
            self.send(answer)

    def at_end(self) -> None:
        if self.fault == "ignore_eof":
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            time.sleep(3600)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--module", default="gpu_impl")
    ap.add_argument("--functions", default="softmax,greedy,dist,temp,top_k,top_p,min_p")
    ap.add_argument("--fault", default=None, choices=sorted(FAULTS))
    ap.add_argument("--on", default=None)
    ap.add_argument("--version", type=int, default=NEWEST)
    ap.add_argument("--strict", action="store_true")
    ap.add_argument("--handshake", default=None, choices=("bad", "hang", "exit"))
    a = ap.parse_args()
    server = Server(a.module, [f for f in a.functions.split(",") if f], a.fault, a.on, a.version)
    server.serve(server.handshake(a.handshake, a.strict))


if __name__ == "__main__":
    main()
