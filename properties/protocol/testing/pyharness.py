"""A harness written in Python over the protocol, for the protocol's own tests: it serves a
module with gpu_impl's API (default gpu_impl), and can be told to misbehave on one function
(``--fault crash|hang|malformed|short|wrong_shape|wrong_dtype|refuse|unsupported|failed``)
so each fault class can be shown to be reported and survived."""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import time

import numpy as np

from properties.protocol import framing

CODES = {np.dtype("float32"): "f32", np.dtype("float64"): "f64", np.dtype("int64"): "i64", np.dtype("int32"): "i32"}


def _resolve(root, qualified: str):
    part, _, fn = qualified.rpartition(".")
    mod = importlib.import_module(f"{root.__name__}.{part}") if part else root
    return getattr(mod, fn, None)


def _write_result(out, a: np.ndarray) -> None:
    a = np.ascontiguousarray(a)
    code = CODES.get(a.dtype, "f32")
    a = a.astype(framing.DTYPES[code])
    dims = " ".join(map(str, a.shape))
    out.write(f"RESULT {code} {a.ndim}{' ' if dims else ''}{dims}\n".encode())
    out.write(a.tobytes())


def serve(module: str, functions: list[str], fault: str | None, fault_on: str | None) -> None:
    root = importlib.import_module(module)
    inp, out = sys.stdin.buffer, sys.stdout.buffer
    if framing.read_line(inp) != f"LOGITCHECK {framing.VERSION}":
        sys.exit(2)
    out.write(f"LOGITCHECK {framing.VERSION} python-{module}\n".encode())
    for f in functions:
        out.write(f"FUNCTION {f}\n".encode())
    out.write(b"END\n")
    out.flush()
    while True:
        try:
            head = framing.read_line(inp).split(" ")
        except EOFError:
            return
        if head[0] == "QUIT":
            return
        fn, nargs = head[1], int(head[2])
        kwargs = {}
        for _ in range(nargs):
            fields = framing.read_line(inp).split(" ")
            name = fields[1]
            code, dims = framing.parse_array_header(["RESULT"] + fields[2:], "RESULT")
            a = framing.read_array(inp, code, dims)
            kwargs[name] = a if isinstance(a, str) or a.ndim else a.item()
        if fn == fault_on:
            if fault == "crash":
                os._exit(139)
            if fault == "hang":
                time.sleep(3600)
            if fault == "malformed":
                out.write(b"OK two\n"); out.flush(); continue
            if fault == "short":
                out.write(b"OK 1\nRESULT f32 1 1000\n" + b"\0" * 12); out.flush(); os._exit(0)
            if fault in ("refused", "unsupported", "failed"):
                out.write(f"ERROR {fault} told to {fault}\n".encode()); out.flush(); continue
        try:
            res = _resolve(root, fn)(**kwargs)
        except ValueError as exc:
            out.write(f"ERROR refused {str(exc).splitlines()[0][:300]}\n".encode()); out.flush(); continue
        res = res if isinstance(res, tuple) else (res,)
        res = tuple(np.asarray(r) for r in res)
        if fn == fault_on and fault == "wrong_shape":
            res = (res[0].reshape(-1)[:-1],) + res[1:]
        if fn == fault_on and fault == "wrong_dtype":
            res = (res[0].astype(np.float32) if np.issubdtype(res[0].dtype, np.integer) else
                   res[0].astype(np.int64),) + res[1:]
        out.write(f"OK {len(res)}\n".encode())
        for r in res:
            _write_result(out, r)
        out.flush()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--module", default="gpu_impl")
    ap.add_argument("--functions", default="softmax,greedy,dist,temp,top_k,top_p,min_p")
    ap.add_argument("--fault", default=None)
    ap.add_argument("--on", default=None)
    a = ap.parse_args()
    serve(a.module, [f for f in a.functions.split(",") if f], a.fault, a.on)


if __name__ == "__main__":
    main()
