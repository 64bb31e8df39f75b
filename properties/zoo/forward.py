"""The ops-zoo mutants (properties/zoo/ops.py) run through gpu_impl's whole-model forward pass,
and where ``layers`` says each one enters.

A mutant replaces public functions of gpu_impl.ops. To run it through the model it is installed
where gpu_impl defines each function as well as in the package, so that gpu_impl's own internal
calls (attention_step → attention_decode → attention) reach it too, as the same bug would in an
engine; its replacement functions are built from a frozen copy of the original ops (no
recursion into themselves). Each run feeds the sequence in chunks of ``CHUNK`` through the KV
cache (a prefill, then decode steps), and is compared with the oracle tensor by tensor against
the float32 (or float16) engine's bounds.
"""
from __future__ import annotations

import contextlib
import functools
import sys
import types
from dataclasses import dataclass
from typing import Iterator

import numpy as np

import gpu_impl.models as gm
import gpu_impl.ops as gops
from oracle.models.layers import OP_WHAT, compare
from properties.models import runs
from properties.zoo.ops import MUTANTS as OP_MUTANTS
from properties.zoo.runner import Mutant

CHUNK = 8
FIXTURE = {"float32": ("gemma2", "F32"), "float16": ("gemma2", "F16")}
# the dtype at which each bug shows (fp16 overflow, fp16 accumulation); float32 for the rest
DTYPE = {"softmax_without_max": "float16", "matmul_fp16_accumulator": "float16"}


def dtype_of(mutant: Mutant) -> str:
    return DTYPE.get(mutant.name, "float32")


def _replacements(mutant: Mutant, frozen: types.ModuleType) -> dict:
    """{function name: buggy function}, built on ``frozen`` so the bug never calls itself."""
    with mutant.apply(frozen) as mod:
        return {name: getattr(mod, name) for name in mutant.replaces}


@contextlib.contextmanager
def installed(mutant: Mutant | None) -> Iterator[None]:
    if mutant is None:
        yield
        return
    frozen = types.ModuleType("gpu_impl.ops(frozen)")
    frozen.__dict__.update({k: getattr(gops, k) for k in gops.__all__})
    saved = []
    try:
        for name, fn in _replacements(mutant, frozen).items():
            home = sys.modules[getattr(gops, name).__module__]
            for target in {id(gops): gops, id(home): home}.values():
                saved.append((target, name, getattr(target, name)))
                setattr(target, name, fn)
        yield
    finally:
        for target, name, fn in reversed(saved):
            setattr(target, name, fn)


@dataclass(frozen=True)
class Entry:
    mutant: str
    verdict: str
    """"diverges" (a tensor past its bound), "raises", "within bounds" (changes values, less than
    a correct engine may) or "does not enter" (bit-identical to the unmutated pass)."""
    tensor: str
    layer: int
    op: str
    detail: str


def run_mutant(mutant: Mutant | None, dtype: str = "float32") -> gm.Decoder:
    """The mutated gpu_impl pass over the fixture's tokens, CHUNK at a time (raises what it raises)."""
    arch, wtype = FIXTURE[dtype]
    dec = gm.Decoder(gm.Checkpoint(runs.path(arch, wtype), dtype))
    toks = np.asarray(runs.TOKENS)
    try:
        with installed(mutant), np.errstate(all="ignore"):
            for s in range(0, toks.size, CHUNK):
                dec(toks[s:s + CHUNK])
    finally:
        run_mutant.last = dec
    return dec


@functools.lru_cache(maxsize=None)
def _control(dtype: str) -> dict[str, np.ndarray]:
    return run_mutant(None, dtype).tensors()


def locate(mutant: Mutant | None, dtype: str = "float32") -> Entry:
    """Run the (mutated) gpu_impl forward and name the first tensor past its bound."""
    arch, wtype = FIXTURE[dtype]
    env = runs.env(arch, wtype, f"gpu_impl-{dtype}")
    name = mutant.name if mutant else "(none)"
    try:
        got = run_mutant(mutant, dtype).tensors()
    except Exception as exc:  # a mutant that breaks shapes is found where it raises
        tensor, layer = run_mutant.last.where
        return Entry(name, "raises", f"{tensor}-{layer}" if layer >= 0 else tensor, layer,
                     OP_WHAT.get(tensor, tensor), f"{type(exc).__name__}: {str(exc)[:120]}")
    _, first = compare(env.exact.tensors, got, env.tensor_bounds())
    if first is None:
        control = _control(dtype)
        same = all(np.array_equal(got[k], control[k], equal_nan=True) for k in control)
        why = "bit-identical to the unmutated pass" if same else f"every tensor within the {dtype} engine's bounds"
        return Entry(name, "does not enter" if same else "within bounds", "", -1, "", why)
    return Entry(name, "diverges", first.name, first.layer, OP_WHAT.get(first.op, first.op),
                 f"relative error {first.rel_err:.3g} > bound {first.threshold:.3g}")
