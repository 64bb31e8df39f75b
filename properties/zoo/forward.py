"""The ops-zoo mutants (properties/zoo/ops.py) run through gpu_impl's whole-model forward pass,
and where ``layers`` says each one enters.

A mutant replaces public functions of gpu_impl.ops. To run it through the model it is installed
where gpu_impl defines each function as well as in the package, so that gpu_impl's own internal
calls (attention_step → attention_decode → attention) reach it too, as the same bug would in an
engine; its replacement functions are built from a frozen copy of the original ops (no
recursion into themselves). Each run feeds the sequence in chunks of ``CHUNK`` through the KV
cache (a prefill, then decode steps), and is compared with the oracle tensor by tensor against
the float32 (or float16) engine's bounds.

``PORT_MUTANTS``: the structural bugs of a Gemma 4 port (per-layer embeddings at the end of the
block, a transposed ``proj``, no ``layer_output_scale``, no embedding scale, exact GELU, the
global layers' ``rope_freqs`` ignored, final softcap 15, a norm on the wrong side of the
residual), as swaps of gpu_impl's pass; ``run_pass`` runs one on any model file.
"""
from __future__ import annotations

import contextlib
import functools
import os
import sys
import types
from dataclasses import dataclass
from typing import Any, Callable, ContextManager, Iterator

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


# ---- the Gemma port's bug list: structural bugs of a whole forward pass ----
#
# Where a bug is one op of gpu_impl.ops called wrongly, its ops-zoo mutant is reused (one
# definition per bug). Where it is the pass's wiring (which value a norm reads, where a step sits
# in the block, how a weight's buffer is read), methods of gpu_impl's ``Decoder`` (or its
# ``Config``) are swapped for buggy ones built from the originals, and the rest of the pass runs
# as gpu_impl runs it. ``Decoder._op`` computes and keeps every named tensor, so swapping it
# changes one tensor by its graph name.

Swap = Callable[[types.SimpleNamespace], dict[str, Callable]]
"""(the unpatched methods of the patched class) -> {method name: buggy method}."""


@dataclass(frozen=True)
class PassMutant:
    name: str
    description: str
    install: Callable[[], ContextManager[None]]


@contextlib.contextmanager
def _swapped(cls: type, swap: Swap) -> Iterator[None]:
    orig = types.SimpleNamespace(**{n: getattr(cls, n) for n in dir(cls) if not n.startswith("__")})
    new = swap(orig)
    try:
        for name, fn in new.items():
            setattr(cls, name, fn)
        yield
    finally:
        for name in new:
            setattr(cls, name, getattr(orig, name))


def _intercept(orig: types.SimpleNamespace, compute: Callable[..., Any]) -> dict[str, Callable]:
    """``Decoder._op`` through ``compute(decoder, name, layer, fn, args, kw)``: the buggy value of
    that tensor, or None for the pass's own; ``Decoder._layer`` keeps the block's input
    (``block_input``), the residual stream a wiring bug may read."""
    def _op(self, name, il, fn, *args, **kw):
        got = compute(self, name, il, fn, args, kw)
        if got is None:
            return orig._op(self, name, il, fn, *args, **kw)
        self.where = (name, il)
        return self._keep(name, il, got)

    def _layer(self, i, x, pos):
        self.block_input = x
        return orig._layer(self, i, x, pos)
    return {"_op": _op, "_layer": _layer}


def _norm_after_residual(orig: types.SimpleNamespace) -> dict[str, Callable]:
    """Post-LN where Gemma's sandwich norm belongs: h = norm(x + attn) instead of x + norm(attn)."""
    def compute(dec, name, il, fn, args, kw):
        if name == "attn_post_norm":
            dec.normed_sum = fn(args[0] + dec.block_input, *args[1:], **kw)
            return dec.normed_sum
        return dec.normed_sum if name == "sa_out" else None
    return _intercept(orig, compute)


def _proj_transposed(orig: types.SimpleNamespace) -> dict[str, Callable]:
    """``blk.N.proj`` read with its two dimensions swapped: ggml's row-major [n_embd][ple] buffer
    taken as [ple][n_embd] and transposed back, the right shape with scrambled entries."""
    def compute(dec, name, il, fn, args, kw):
        if name != "pe_proj":
            return None
        w = args[1].T  # [n_embd, ple] as the pass holds it
        return fn(args[0], w.reshape(w.shape[::-1]), **kw)
    return _intercept(orig, compute)


def _ple_at_block_end(orig: types.SimpleNamespace) -> dict[str, Callable]:
    """The per-layer embedding added after ``layer_output_scale`` (at the very end of the block)
    instead of before it."""
    return {"_per_layer_embedding": lambda self, i, y: y,
            "_output_scale": lambda self, i, y: orig._per_layer_embedding(self, i, orig._output_scale(self, i, y))}


def _output_scale_missing(orig: types.SimpleNamespace) -> dict[str, Callable]:
    """The block's output never multiplied by ``layer_output_scale``."""
    return {"_output_scale": lambda self, i, y: self._op("out_scaled", i, lambda: y)}


def _freq_factors_ignored(orig: types.SimpleNamespace) -> dict[str, Callable]:
    """The global layers rotate every pair at RoPE's plain frequencies: ``rope_freqs`` unread."""
    def rope_args(self, layer=0, freq_factors=None):
        return orig.rope_args(self, layer, None)
    return {"rope_args": rope_args}


Q_SCALE_FACTOR = (64 / 48) ** 0.5
"""A query scaled by 1/√48 where 1/√64 belongs (a head size taken from the wrong layer or config
field): every attention score 15.5 % too large."""


def _q_scale(factor: float) -> Swap:
    """Every layer's attention scale multiplied by ``factor`` (gemma4's scale of 1 included)."""
    def swap(orig: types.SimpleNamespace) -> dict[str, Callable]:
        def attn_args(self, layer):
            args = orig.attn_args(self, layer)
            return args | {"scale": args["scale"] * factor}
        return {"attn_args": attn_args}
    return swap


def q_scale_mutant(factor: float) -> PassMutant:
    """The query-scale bug with any factor (the smallest flagged one is measured)."""
    return PassMutant(f"q_scale_x{factor:.6g}", f"attention scores scaled by {factor:.6g}",
                      lambda: _swapped(gm.Config, _q_scale(factor)))


def embed_scale_mutant(factor: float) -> PassMutant:
    """The embedding scale sqrt(n_embd) multiplied by ``factor`` (a wrong hidden size, a rounded
    constant): enters at ``inp_scaled``."""
    def swap(orig: types.SimpleNamespace) -> dict[str, Callable]:
        def compute(dec, name, il, fn, args, kw):
            return fn(*args, **(kw | {"scale": kw["scale"] * factor})) if name == "inp_scaled" else None
        return _intercept(orig, compute)
    return PassMutant(f"embed_scale_x{factor:.6g}", f"embedding scale multiplied by {factor:.6g}",
                      lambda: _swapped(gm.Decoder, swap))


NORM_OPS = frozenset({"attn_norm", "attn_post_norm", "ffn_norm", "ffn_post_norm", "per_layer_embd_out",
                      "per_layer_proj", "result_norm", "Qcur_normed", "Kcur_normed"})
"""The graph names of the pass's RMSNorms that carry a stored weight (gemma3n's AltUp router and
LAuReL norms are not named ops; ``Vcur_normed`` has no weight)."""


def norm_offset_mutant(eps: float) -> PassMutant:
    """Every weighted RMSNorm of the pass (``NORM_OPS``) multiplies by (stored weight + ``eps``):
    Gemma's GGUF holds 1 + w, and a port that adds the unit offset itself, or rounds it on the way,
    is off by a constant. The offset is added in float32, so that ``eps`` is the error even where
    the engine holds its weights in float16 (an fp16 add would round small offsets away)."""
    def swap(orig: types.SimpleNamespace) -> dict[str, Callable]:
        def compute(dec, name, il, fn, args, kw):
            if name not in NORM_OPS or len(args) < 2 or args[1] is None:
                return None
            w = args[1].astype("float32") + np.float32(eps)
            return fn(args[0], w, *args[2:], **kw)
        return _intercept(orig, compute)
    return PassMutant(f"norm_offset_{eps:+.6g}", f"every RMSNorm weight offset by {eps:+.6g}",
                      lambda: _swapped(gm.Decoder, swap))


def _op_mutant(name: str) -> PassMutant:
    m = next(m for m in OP_MUTANTS if m.name == name)
    return PassMutant(m.name, m.description, lambda: installed(m))


def _wiring(name: str, description: str, swap: Swap, cls: Callable[[], type] = lambda: gm.Decoder) -> PassMutant:
    return PassMutant(name, description, lambda: _swapped(cls(), swap))


PORT_MUTANTS: tuple[PassMutant, ...] = (
    _op_mutant("embedding_scale_missing"),
    _op_mutant("gelu_exact_for_tanh"),
    _op_mutant("softcap_15_not_30"),
    _wiring("norm_after_residual", "the post-attention norm applied to the residual sum (post-LN) instead of "
            "to the attention output before the add", _norm_after_residual),
    _wiring("ple_at_block_end", "per-layer embedding added after layer_output_scale, at the end of the block",
            _ple_at_block_end),
    _wiring("proj_transposed", "blk.N.proj read with its dimensions swapped", _proj_transposed),
    _wiring("layer_output_scale_missing", "the block output not multiplied by layer_output_scale",
            _output_scale_missing),
    _wiring("rope_freq_factors_ignored", "rope_freqs ignored on the global layers (every pair rotated)",
            _freq_factors_ignored, lambda: gm.Config),
    _wiring("q_scale_sqrt48", "queries scaled by 1/√48 instead of 1/√64 (scores ×1.155)", _q_scale(Q_SCALE_FACTOR),
            lambda: gm.Config),
)
GEMMA4_ONLY = frozenset({"ple_at_block_end", "proj_transposed", "layer_output_scale_missing",
                         "rope_freq_factors_ignored"})
"""The mutants of steps only Gemma 4 has (on another model they change nothing)."""


def run_pass(mutant: PassMutant | None, model: os.PathLike[str] | str, dtype: str = "float32") -> dict[str, np.ndarray]:
    """The (mutated) gpu_impl pass over the goldens' tokens, CHUNK at a time: its named tensors
    (``result_output``: the logits)."""
    dec = gm.Decoder(gm.Checkpoint(model, dtype))
    toks = np.asarray(runs.TOKENS)
    with (mutant.install() if mutant else contextlib.nullcontext()), np.errstate(all="ignore"):
        for s in range(0, toks.size, CHUNK):
            dec(toks[s:s + CHUNK])
    return dec.tensors()
