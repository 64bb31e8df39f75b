"""The judged API as a table, read from the reference implementation's code (gpu_impl and its
``ops``, ``quants``, ``engines`` modules), so it cannot go stale: every function's qualified name,
its parameters and defaults, and the shape and dtype its results must have.

``logitcheck signatures`` prints it; the protocol names positional arguments with it."""
from __future__ import annotations

import functools
import importlib
import inspect
from dataclasses import dataclass
from typing import Any

import numpy as np

PARTS = ("ops", "quants", "engines")
MODULES = {"": "gpu_impl", "ops": "gpu_impl.ops", "quants": "gpu_impl.quants", "engines": "gpu_impl.engines"}
IN_PROCESS_ONLY = frozenset({"ops.KVCache", "ops.attention_decode", "ops.attention_step"})
"""Functions that take or return a live object (a KV cache): judged in process only."""

SELECTORS = frozenset({"greedy", "dist", "engines.llama_cpp_chain_dist", "engines.vllm_sample", "engines.vllm_sample_seeded", "engines.mistralrs_sample", "engines.candle_sample"})
LOGPROBS = {"engines.logprobs_top_n": "(i64[batch, n] token ids, f32[batch, n] logprobs)",
            "engines.logprobs_of": "f32[batch] logprobs"}
SHAPE_OF_FIRST = frozenset({"ops.softmax", "ops.log_softmax", "ops.rms_norm", "ops.layer_norm", "ops.rope",
                            "ops.gelu", "ops.silu", "ops.softcap"})


@dataclass(frozen=True)
class Signature:
    qualified: str
    params: tuple[tuple[str, str], ...]
    """(name, default as text, '' when required)."""
    returns: str

    def line(self) -> str:
        args = ", ".join(n if not d else f"{n}={d}" for n, d in self.params)
        return f"{self.qualified}({args}) -> {self.returns}"


def _returns(qualified: str) -> str:
    if qualified in SELECTORS:
        return "i64[batch] token ids"
    if qualified == "mirostat_v2":
        return "(i64[batch] token ids, f32[batch] mu)"
    if qualified == "rejection_sample":
        return "(i64[batch, K+1] emitted tokens, -1 after the stop; i64[batch] how many)"
    if qualified in LOGPROBS:
        return LOGPROBS[qualified]
    if "." not in qualified or qualified.startswith("engines.") and qualified not in SELECTORS:
        return "f32 like logits (-inf = dropped)" if qualified != "engines.mistralrs_weights" else "f32 weights like logits"
    if qualified in SHAPE_OF_FIRST:
        return "f32 like x"
    if qualified == "ops.argmax":
        return "i64 indices, x's shape without its last axis"
    return "f32 array(s)"


@functools.lru_cache(maxsize=1)
def table() -> tuple[Signature, ...]:
    rows = []
    for part, modname in MODULES.items():
        mod = importlib.import_module(modname)
        for fn in getattr(mod, "__all__", ()):
            obj = getattr(mod, fn)
            qualified = f"{part}.{fn}" if part else fn
            if not callable(obj) or inspect.isclass(obj) or qualified in IN_PROCESS_ONLY:
                continue
            params = tuple((p.name, "" if p.default is inspect.Parameter.empty else repr(p.default))
                           for p in inspect.signature(obj).parameters.values()
                           if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL))
            rows.append(Signature(qualified, params, _returns(qualified)))
    return tuple(rows)


@functools.lru_cache(maxsize=None)
def argument_names(qualified: str) -> tuple[str, ...]:
    for row in table():
        if row.qualified == qualified:
            return tuple(n for n, _ in row.params)
    raise KeyError(f"{qualified} is not a function of the judged API")


def _first_shape(args: dict[str, Any]) -> tuple[int, ...] | None:
    for key in ("logits", "x", "weights", "gate"):
        if key in args and hasattr(args[key], "shape"):
            return tuple(np.shape(args[key]))
    return None


@dataclass(frozen=True)
class Expected:
    """One result a function must return: ``kind`` "float" (exactly f32: the judged contract is
    float32, and an f64 answer would be judged on numbers the engine never produces) or "int"
    (token ids or indices, i64 or i32); ``shape`` None where the arguments do not fix it."""
    kind: str
    shape: tuple[int, ...] | None


WIRE_CODES = {"float": ("f32",), "int": ("i64", "i32")}
NUMPY_DTYPES = {"float": (np.dtype(np.float32),), "int": (np.dtype(np.int64), np.dtype(np.int32))}
UNKNOWN_SHAPE_MIN = 1 << 24
"""Elements a result whose shape the arguments do not fix may have at least (64 MiB of f32);
more only in proportion to the call's own inputs (16 x their elements)."""
RESULT_COUNTS = {"ops.project_qkv": 3}


def _elements(args: dict[str, Any]) -> int:
    return sum(int(np.size(v)) for v in args.values() if hasattr(v, "shape"))


def element_cap(args: dict[str, Any]) -> int:
    """The most elements a result of unknown shape may announce before anything is allocated."""
    return max(UNKNOWN_SHAPE_MIN, 16 * _elements(args))


def _dims(value: Any) -> tuple[int, ...] | None:
    try:
        return tuple(int(d) for d in np.ravel(np.asarray(value)))
    except (TypeError, ValueError):
        return None


def expected_results(qualified: str, args: dict[str, Any]) -> list[Expected]:
    """What ``qualified`` returns for these arguments, read before any result byte is allocated."""
    shape = _first_shape(args)
    batch = shape[:1] if shape else None
    if qualified == "rejection_sample":
        d = np.shape(args.get("draft_tokens", ()))
        b, k = (d[0], d[1]) if len(d) == 2 else (None, None)
        return [Expected("int", (b, k + 1) if b is not None else None), Expected("int", (b,) if b is not None else None)]
    if qualified == "engines.logprobs_top_n":
        n = args.get("n")
        bn = (shape[0], int(np.asarray(n))) if shape and n is not None and np.ndim(n) == 0 else None
        return [Expected("int", bn), Expected("float", bn)]
    if qualified == "engines.logprobs_of":
        return [Expected("float", batch)]
    if qualified in SELECTORS:
        return [Expected("int", batch)]
    if qualified == "mirostat_v2":
        return [Expected("int", batch), Expected("float", batch)]
    if "." not in qualified or qualified.startswith("engines.") or qualified in SHAPE_OF_FIRST \
            or qualified in ("ops.swiglu", "ops.geglu"):
        return [Expected("float", shape)]
    if qualified == "ops.argmax":
        return [Expected("int", shape[:-1] if shape else None)]
    if qualified == "quants.dequantize":
        return [Expected("float", _dims(args["shape"]) if "shape" in args else None)]
    if qualified == "quants.dequantize_row":
        return [Expected("float", (int(np.asarray(args["row_len"])),) if "row_len" in args else None)]
    return [Expected("float", None)] * RESULT_COUNTS.get(qualified, 1)


def check_header(want: Expected, code: str, dims: tuple[int, ...], args: dict[str, Any]) -> str | None:
    """Why a ``RESULT <code> <dims>`` header cannot start the result ``want``, or None: checked
    before the result's bytes are read, so a wrong or huge announcement allocates nothing."""
    if code not in WIRE_CODES[want.kind]:
        return f"{code}, expected {' or '.join(WIRE_CODES[want.kind])}"
    if want.shape is not None and tuple(dims) != tuple(want.shape):
        return f"shape {tuple(dims)}, expected {tuple(want.shape)}"
    if want.shape is None and int(np.prod(dims, dtype=np.float64)) > element_cap(args):
        return f"{tuple(dims)} announced, more than {element_cap(args)} elements for these arguments"
    return None


def check_results(qualified: str, args: dict[str, Any], results: list[Any]) -> str | None:
    """Why ``results`` cannot be what ``qualified`` returns (count, exact dtype, shape), or None."""
    want = expected_results(qualified, args)
    if len(results) != len(want):
        return f"{len(results)} result(s), {qualified} returns {len(want)}"
    for i, (w, r) in enumerate(zip(want, results)):
        dt = np.asarray(r).dtype
        if dt not in NUMPY_DTYPES[w.kind]:
            return f"result {i} is {dt}, expected {' or '.join(str(d) for d in NUMPY_DTYPES[w.kind])}" \
                   f" ({'floats' if w.kind == 'float' else 'integer ids'})"
        if w.shape is not None and tuple(np.shape(r)) != w.shape:
            return f"result {i} has shape {tuple(np.shape(r))}, expected {w.shape}"
    return None
