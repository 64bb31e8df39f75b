"""Local replay: every dumped tensor recomputed by the oracle from the engine's own dumped inputs,
so that what is judged at a tensor is the error its own ops made, not the drift that reached it.

The float64 bound of ``error_model.envelope`` and the matched reference (``matched.py``) judge a
tensor against a pass that started from the same tokens: their bounds must admit every rounding
made upstream, propagated. On a model whose norms amplify (the drift models: weights of rms 40)
that admitted drift is larger than some real bugs (exact GELU for tanh changes gelu by 1.8e-4 of
its value; a final softcap of 15 for 30 moves logits by 0.4), which then pass as drift.

Replay removes the drift. The oracle's pass runs with a hook that, at every site whose tensor the
dump holds, records what the oracle computed there and hands the engine's own value on (teacher
forcing): each op reads exactly the inputs the engine's op read, and the residual at a tensor is
the error of the ops between the nearest dumped tensors upstream and this one, nothing earlier.

The replay stores what the engine stores: for an engine that stores below float32, every weight
and op output is rounded to its storage dtype (``matched.storage_hook``), except the ops it fuses
(``Engine.fused``) and the tensors the dump shows kept wider (a value not representable in the
storage dtype: gpu_impl keeps its logits in float32), with the unnamed steps of their op (the
logits before the softcap). Two bounds, both from the error model's per-op widths:

- **One op** (``ONE_OP``: a tensor whose declared inputs the dump holds, with no undumped op
  between them and it): per element, the engine's value lies within MARGIN × the op's allowed
  compute error (``error_model.allowed``: the float32 compute for the storage engines, the engine's
  own model otherwise) of the replay's exact value, plus half a storage step (the engine rounds
  that value once to store it; float32 for a tensor kept wide). A correct engine never leaves this
  bracket; a bug below one storage step leaves it wherever it moves a value across a rounding
  boundary that the compute error cannot reach (exact GELU in bfloat16: about one value in seven
  on the drift models). The row's figure is the largest (|Δ| - half a step) / (MARGIN × allowed)
  over the elements: 0 for a value within half a step of the exact result.
- **Several ops** (attention, a residual after undumped steps, the logits): the RMS relative
  residual against MARGIN × the largest of ``RUNS`` Monte Carlo draws of the same teacher-forced
  pass with the engine's compute noise, plus, for a rounded tensor, one storage rounding the
  replay does not match (u: an engine may store an intermediate the replay keeps, or keep one it
  stores; gpu_impl stores the rotated query of a layer that shares another's KV), as the matched
  reference does.

Replay assumes the engine computes each op from the values it dumps (an engine that dumps a rounded
copy of a value it keeps wider has its next tensor off by that rounding), and that an engine storing
below float32 rounds a wider file's weights to nearest, ties to even, as it loads them (a weight one
storage step off moves its norm's or product's output by that step: a norm weight + 1.4e-5 on weights
of rms 40 in bfloat16 is flagged where it crosses one rounding boundary); gpu_impl's engines and
llama.cpp's graph do. The float64 and matched bounds keep judging the propagated error.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from oracle.models import Model, Site, forward
from oracle.models.layers import graph_order, split_name
from properties.models import matched as M
from properties.models.error_model import (ENGINES, MARGIN, RUNS, UNIT_ROUNDOFF, Engine, allowed, compute_model,
                                           noise_hook)

# graph op -> the graph ops (same layer; "a|b": whichever the pass has) of the tensors it is
# computed from by a single op
ONE_OP: dict[str, tuple[str, ...]] = {
    "ffn_gate": ("ffn_norm",), "ffn_up": ("ffn_norm",),
    "ffn_geglu": ("ffn_gate", "ffn_up"), "ffn_swiglu": ("ffn_gate", "ffn_up"),
    "ffn_out": ("ffn_geglu|ffn_swiglu",),
    "attn_out": ("kqv_out",),
    "attn_post_norm": ("attn_out",), "ffn_post_norm": ("ffn_out",),
    "ffn_norm": ("sa_out|ffn_inp",),
}
# significand bits and smallest normal exponent of each storage dtype
_BITS = {"float32": (24, -126), "float16": (11, -14), "bfloat16": (8, -126)}


def half_step(v: np.ndarray, storage: str) -> np.ndarray:
    """Half the spacing of ``storage`` values at |v| (the most a nearest rounding moves v)."""
    p, emin = _BITS[storage]
    _, e = np.frexp(np.abs(v))
    return np.ldexp(0.5, np.maximum(e - 1, emin) - (p - 1))


def representable(x: np.ndarray, storage: str) -> bool:
    """Every finite value of ``x`` is exactly a ``storage`` value (the engine stored it there)."""
    x = np.asarray(x, np.float64)
    f = x[np.isfinite(x)]
    return bool(np.array_equal(M.rounded(f, storage), f))


@dataclass(frozen=True)
class LocalRow:
    name: str
    statistic: str
    """"bracket": the largest (|Δ| - half a storage step) / allowed compute error over the
    elements (bound 1); "rms": ‖Δ‖ / ‖replay‖."""
    value: float
    bound: float
    past: int = 0
    """Bracket rows: how many elements are past their bound."""

    @property
    def ratio(self) -> float:
        if math.isnan(self.value):
            return math.inf
        return self.value / self.bound if self.bound > 0 else (0.0 if self.value == 0 else math.inf)

    @property
    def exceeds(self) -> bool:
        return not self.value <= self.bound

    def line(self) -> str:
        if self.statistic == "bracket":
            return (f"{self.name}: {self.past} elements past the one-op bound (at worst ×{self.value:.3g} the "
                    f"allowed compute error past the storage rounding)")
        return f"{self.name}: RMS relative residual {self.value:.3g} (bound {self.bound:.3g})"


@dataclass(frozen=True)
class Replay:
    engine: str
    rows: tuple[LocalRow, ...]
    """In graph order: every dumped tensor the oracle's pass computes."""

    def first(self) -> LocalRow | None:
        return next((r for r in self.rows if r.exceeds), None)

    def worst(self) -> LocalRow | None:
        return max(self.rows, key=lambda r: r.ratio) if self.rows else None

    def by_name(self) -> dict[str, LocalRow]:
        return {r.name: r for r in self.rows}


@dataclass
class _Trace:
    """One teacher-forced pass: per forced site, the value before and after storing it, and the
    site (for its allowed error)."""
    pre: dict[str, np.ndarray]
    stored: dict[str, np.ndarray]
    sites: dict[str, Site]
    order: list[str]
    """Op outputs in pass order ("" unnamed)."""


def _pass(model: Model, tokens: Sequence[int], forced: Mapping[str, np.ndarray], noise, store,
          wide: frozenset[int]) -> _Trace:
    """The oracle's pass with ``noise`` (compute error, or None), then ``store`` (storage rounding,
    or None) at each op output but the ``wide`` ones (indices among op outputs), and the dump's
    value handed on at each site ``forced`` holds."""
    t = _Trace({}, {}, {}, [])

    def hook(site: Site, x: np.ndarray) -> np.ndarray:
        if site.op in ("weight", "matmul_input"):
            x = noise(site, x) if noise is not None else x
            return store(site, x) if store is not None else x
        i = len(t.order)
        t.order.append(site.name)
        pre = noise(site, x) if noise is not None else x
        x = store(site, pre) if store is not None and i not in wide else pre
        v = forced.get(site.name) if site.name else None
        if v is None or v.size != x.size:
            return x
        t.pre[site.name], t.stored[site.name], t.sites[site.name] = pre, x.reshape(x.shape[0], -1), site
        return np.asarray(v, np.float64).reshape(x.shape)
    with np.errstate(over="ignore", invalid="ignore"):  # a dump's inf or NaN flows on as the engine's did
        forward(model, tokens, hook=hook)
    return t


def _wide(order: Sequence[str], kept: frozenset[str]) -> frozenset[int]:
    """The op outputs an engine keeps wide: each named one in ``kept``, with the unnamed steps
    just before it (steps of the same op: the logits before the softcap)."""
    out, pending = set(), []
    for i, n in enumerate(order):
        if n:
            if n in kept:
                out.update(pending + [i])
            pending = []
        else:
            pending.append(i)
    return frozenset(out)


def one_op(name: str, order: Sequence[str], forced: Mapping[str, np.ndarray]) -> bool:
    """``name`` is computed by one op from dumped tensors: its ``ONE_OP`` inputs are dumped, and
    every op output between the first of them and it is dumped too (nothing undumped can feed it)."""
    op, layer = split_name(name)
    if op not in ONE_OP or name not in order:
        return False
    at, idx = order.index(name), []
    for alternatives in ONE_OP[op]:
        hit = next((f"{a}-{layer}" for a in alternatives.split("|") if f"{a}-{layer}" in forced), None)
        if hit is None or hit not in order[:at]:
            return False
        idx.append(order.index(hit))
    return all(n in forced for n in order[min(idx) + 1:at])


def _bracket(name: str, got: np.ndarray, ref: _Trace, compute: Engine, storage: str) -> LocalRow:
    """Per element, |Δ| past half a storage step as a fraction of the op's allowed compute error
    (MARGIN × ``allowed``): past 1 is past the bracket. A value within half a step of the exact
    result is 0 (correctly rounded whatever the compute error)."""
    site, exact = ref.sites[name], ref.pre[name].reshape(got.shape)
    width = MARGIN * allowed(compute, site, ref.pre[name]).reshape(got.shape)
    over = np.abs(got - exact) - half_step(np.abs(exact) + width, storage)
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.where(over <= 0, 0.0, over / width)
    r = np.where(np.isnan(r), np.inf, r)
    return LocalRow(name, "bracket", float(r.max()) if r.size else 0.0, 1.0, int(np.count_nonzero(r > 1)))


def _rms_rel(a: np.ndarray, ref: np.ndarray) -> float:
    n, d = np.linalg.norm(ref), np.linalg.norm(a - ref)
    return float(d / n) if n > 0 else (0.0 if d == 0 else math.inf)


def replay(model: Model, tokens: Sequence[int], tensors: Mapping[str, np.ndarray], engine: str, *,
           runs: int = RUNS, seed: int = 0) -> Replay:
    """The dump ``tensors`` (graph names -> [tokens, features]) of ``engine`` on ``tokens``, each
    tensor against the oracle's replay of it from the dump's own inputs."""
    eng = ENGINES[engine]
    rounds = eng.storage != "float32"
    compute = compute_model(eng) if rounds else eng
    forced = {k: np.asarray(v, np.float64) for k, v in tensors.items()
              if k not in ("logits", "tokens", "positions") and np.asarray(v).dtype.kind in "fiu"}
    kept = frozenset(k for k, v in forced.items() if rounds and not representable(v, eng.storage))
    store = M.storage_hook(eng.storage, fused=eng.fused) if rounds else None
    ref = _pass(model, tokens, forced, None, store, frozenset())
    wide = _wide(ref.order, kept)
    if wide:
        ref = _pass(model, tokens, forced, None, store, wide)
    draws = [_pass(model, tokens, forced, noise_hook(compute, np.random.default_rng([seed, r])), store, wide)
             for r in range(runs)]
    rows = []
    for name in graph_order(list(ref.stored)):
        want = ref.stored[name]
        got = forced[name].reshape(want.shape)
        rounded = rounds and name not in kept
        if one_op(name, ref.order, forced) and (not eng.converts_inputs or ref.sites[name].op != "matmul"):
            rows.append(_bracket(name, got, ref, compute, eng.storage if rounded else "float32"))
            continue
        value = _rms_rel(got, want) if np.isfinite(got).all() else math.nan
        slack = UNIT_ROUNDOFF[eng.storage] if rounded else 0.0
        rows.append(LocalRow(name, "rms", value, MARGIN * max(_rms_rel(d.stored[name], want) for d in draws) + slack))
    return Replay(engine, tuple(rows))
