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
    for key in ("logits", "x", "weights"):
        if key in args and hasattr(args[key], "shape"):
            return tuple(np.shape(args[key]))
    return None


def check_results(qualified: str, args: dict[str, Any], results: list[Any]) -> str | None:
    """Why ``results`` cannot be what ``qualified`` returns (shape, dtype, count), or None."""
    shape = _first_shape(args)
    want: list[tuple[str, tuple[int, ...] | None]]
    if qualified == "rejection_sample":
        d = np.shape(args.get("draft_tokens", ()))
        b, k = (d[0], d[1]) if len(d) == 2 else (None, None)
        want = [("int", (b, k + 1) if b is not None else None), ("int", (b,) if b is not None else None)]
    elif qualified == "engines.logprobs_top_n":
        n = args.get("n")
        bn = (shape[0], int(np.asarray(n))) if shape and n is not None and np.ndim(n) == 0 else None
        want = [("int", bn), ("float", bn)]
    elif qualified == "engines.logprobs_of":
        want = [("float", shape[:1] if shape else None)]
    elif qualified in SELECTORS:
        want = [("int", shape[:1] if shape else None)]
    elif qualified == "mirostat_v2":
        want = [("int", shape[:1] if shape else None), ("float", shape[:1] if shape else None)]
    elif "." not in qualified or qualified.startswith("engines.") or qualified in SHAPE_OF_FIRST:
        want = [("float", shape)]
    else:
        return None
    if len(results) != len(want):
        return f"{len(results)} result(s), {qualified} returns {len(want)}"
    for i, ((kind, shp), r) in enumerate(zip(want, results)):
        dt = np.asarray(r).dtype
        ok = np.issubdtype(dt, np.integer) if kind == "int" else np.issubdtype(dt, np.floating)
        if not ok:
            return f"result {i} is {dt}, expected {'integer ids' if kind == 'int' else 'floats'}"
        if shp is not None and tuple(np.shape(r)) != shp:
            return f"result {i} has shape {tuple(np.shape(r))}, expected {shp}"
    return None
