"""Framing of the harness protocol (docs/protocol.md): header lines and raw little-endian arrays.

Everything here is pure: bytes in, arrays out, or a ``FrameError`` saying what was wrong. The
process that carries the frames is ``properties.protocol.harness``."""
from __future__ import annotations

from typing import Any, BinaryIO

import ml_dtypes
import numpy as np

VERSION = 2
"""The newest protocol version: 2 echoes each call's id in its answer (``CALL <id> ...``,
``OK <id> ...``, ``ERROR <id> ...``), so no answer can be taken for another call's. Version 1
(no ids) is still read; docs/protocol.md states what it cannot catch."""
MAX_HEADER = 4096
DTYPES: dict[str, np.dtype] = {"f32": np.dtype("<f4"), "f64": np.dtype("<f8"), "i64": np.dtype("<i8"),
                               "i32": np.dtype("<i4"), "u8": np.dtype("u1"), "str": np.dtype("u1")}
MAX_ELEMENTS = 1 << 34  # a header announcing more is malformed, not a reason to allocate


class FrameError(Exception):
    """The harness sent something the protocol does not allow. ``kind``: malformed, short."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def wire_array(value: Any) -> tuple[str, np.ndarray]:
    """(dtype code, contiguous little-endian array) of one argument as logitcheck sends it:
    float16/bfloat16 widened exactly to f32, Python floats f64, integers i64, booleans u8."""
    if isinstance(value, str):
        return "str", np.frombuffer(value.encode(), dtype=np.uint8)
    if isinstance(value, (bool, np.bool_)):
        return "u8", np.asarray(int(value), dtype=np.uint8)
    if isinstance(value, (int, np.integer)):
        return "i64", np.asarray(value, dtype="<i8")
    if isinstance(value, float):
        return "f64", np.asarray(value, dtype="<f8")
    a = np.asarray(value)
    if a.dtype == np.bool_:
        return "u8", np.ascontiguousarray(a, dtype=np.uint8)
    if a.dtype in (np.float16, ml_dtypes.bfloat16) or a.dtype == np.float32:
        return "f32", np.ascontiguousarray(a, dtype="<f4")
    if a.dtype == np.float64:
        return "f64", np.ascontiguousarray(a, dtype="<f8")
    if np.issubdtype(a.dtype, np.integer):
        return "i64", np.ascontiguousarray(a, dtype="<i8")
    raise TypeError(f"an argument of dtype {a.dtype} has no protocol dtype")


def encode_call(function: str, args: list[tuple[str, Any]], call_id: int | None = None) -> list[bytes | memoryview]:
    """``CALL`` with its ``ARG`` arrays, as the pieces to write in order (the arrays' own memory,
    not copies); ``call_id`` (version 2) goes after ``CALL``."""
    head = f"CALL {function} {len(args)}" if call_id is None else f"CALL {call_id} {function} {len(args)}"
    parts: list[bytes | memoryview] = [f"{head}\n".encode()]
    for name, value in args:
        code, a = wire_array(value)
        dims = " ".join(str(d) for d in a.shape)
        parts.append(f"ARG {name} {code} {a.ndim}{' ' if dims else ''}{dims}\n".encode())
        if a.size:  # (a memoryview of an empty array cannot be cast to bytes: send nothing)
            parts.append(memoryview(np.ascontiguousarray(a).reshape(-1)).cast("B"))
    return parts


def describe_args(args: list[tuple[str, Any]]) -> str:
    """``top_p(logits f32[3,32000], p f64[3], min_keep i64[])`` style, for messages."""
    out = []
    for name, value in args:
        try:
            code, a = wire_array(value)
            out.append(f"{name}={value!r}" if a.ndim == 0 and code != "str" else
                       f"{name}={value!r}" if code == "str" else f"{name} {code}[{','.join(map(str, a.shape))}]")
        except TypeError:
            out.append(f"{name} {type(value).__name__}")
    return ", ".join(out)


def read_line(stream: BinaryIO) -> str:
    """One header line without its newline; FrameError on EOF, overlong or non-ASCII lines."""
    line = stream.readline(MAX_HEADER + 1)
    if not line:
        raise EOFError("end of stream")
    if not line.endswith(b"\n"):
        if len(line) > MAX_HEADER:
            raise FrameError("malformed", f"a header line longer than {MAX_HEADER} bytes")
        raise FrameError("short", f"the stream ended inside a header line: {line[:80]!r}")
    try:
        return line[:-1].decode("ascii")
    except UnicodeDecodeError:
        raise FrameError("malformed", f"a header line that is not ASCII: {line[:80]!r}") from None


def parse_array_header(fields: list[str], tag: str) -> tuple[str, tuple[int, ...]]:
    """(dtype code, shape) from ``RESULT <dtype> <ndim> <dims...>`` split into fields."""
    if not fields or fields[0] != tag:
        raise FrameError("malformed", f"expected a {tag} header, got {' '.join(fields)[:120]!r}")
    try:
        code, ndim = fields[1], int(fields[2])
        dims = tuple(int(d) for d in fields[3:])
    except (IndexError, ValueError):
        raise FrameError("malformed", f"bad {tag} header {' '.join(fields)[:120]!r}") from None
    if code not in DTYPES:
        raise FrameError("malformed", f"unknown dtype {code!r} (known: {', '.join(DTYPES)})")
    if ndim != len(dims) or ndim < 0 or any(d < 0 for d in dims):
        raise FrameError("malformed", f"{tag} header says ndim {ndim} but gives dims {list(dims)}")
    if int(np.prod(dims, dtype=np.float64)) > MAX_ELEMENTS:
        raise FrameError("malformed", f"{tag} announces {dims} elements")
    return code, dims


def read_array(stream: BinaryIO, code: str, dims: tuple[int, ...]) -> Any:
    """The raw bytes of one array, as a NumPy array (``str``: a Python string)."""
    dt = DTYPES[code]
    need = int(np.prod(dims, dtype=np.int64)) * dt.itemsize
    data = stream.read(need) if need else b""
    if len(data) != need:
        raise FrameError("short", f"a {code}{list(dims)} result announced {need} bytes, {len(data)} arrived")
    if code == "str":
        return data.decode("utf-8", errors="replace")
    a = np.frombuffer(data, dtype=dt).reshape(dims)
    return a.astype(dt.newbyteorder("="), copy=True)
