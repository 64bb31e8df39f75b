"""The precision-matched reference: the oracle's forward pass with an engine's storage precision
emulated at every tensor boundary, and the residual a correct engine of that precision may still
show against it.

Against the float64 oracle, a float16 or bfloat16 engine's error is mostly its own storage
rounding, propagated: every stored activation rounded by up to u·|x| (u = 2^-11, 2^-8), then
multiplied through norms whose weights reach 300. The float64 error model must admit all of it
(``error_model.envelope``), and a real bug of the same size hides inside that bound (a query scaled
by 1/√48 instead of 1/√64 was "within" the float16 model on a drift-heavy model).

The matched reference makes the same storage roundings deterministically: every weight rounded to
the storage dtype (as the engine loads it) and every op output rounded (as the engine stores it),
the arithmetic in between exact. A correct engine computes in float32 instead, a relative change of
about 2^-24 per op, which moves a value across a storage rounding boundary only rarely (with
probability about u32/u per element), so it follows the matched reference far more closely than it
follows the float64 oracle; a bug does not.

Residual model, in units of u: the engine is the matched reference plus
- float32 compute rounding, the ``gpu_impl-float32`` noise model (√K·u32·Σ|w·x| per product, the
  norms' row factor, …) drawn before each storage rounding, so that the rare flips of a rounding it
  causes propagate as they would in the engine (Monte Carlo, fixed seeds, ``RUNS`` runs);
- one storage rounding not matched at each tensor, u relative, local (not propagated): an engine
  may keep a value the reference rounds (gpu_impl keeps its logits in float32) or round one it
  keeps.
``Matched.tensor_bounds``: MARGIN × the Monte Carlo envelope + u, per tensor, on the RMS relative
error ‖Δ‖/‖ref‖ (``oracle.models.layers.Row.rms_rel``), not the max-relative one of the float64
verdict: a correct engine's residual is a few flipped roundings, one storage step at one element
each (as large as the tensor's own rounding in a max over elements, and tiny in the whole tensor),
while a bug moves the whole tensor. An unmatched rounding moves each element by at most u·|x|, so
‖Δ‖ by at most u·‖x‖.

``explain`` reads a dump against the matched references of float32, float16 and bfloat16 and
says which storage precision explains it: the finest one whose residual bound holds at every
tensor ("consistent with a bfloat16 engine"; a coarser one admits a finer engine too), or
"inconsistent with any" where none does.
"""
from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Mapping, Sequence

import ml_dtypes
import numpy as np

from oracle.models import Forward, Model, Site, forward
from oracle.models.layers import Row, compare
from properties.models.error_model import ENGINES, MARGIN, RUNS, UNIT_ROUNDOFF, Engine, noise_hook

STORAGE = ("float32", "float16", "bfloat16")
_NUMPY = {"float32": np.float32, "float16": np.float16, "bfloat16": ml_dtypes.bfloat16}
COMPUTE = ENGINES["gpu_impl-float32"]
"""The compute between two stores: float32 arithmetic, in any legal order."""


def rounded(x: np.ndarray, storage: str) -> np.ndarray:
    """``x`` rounded to ``storage`` (nearest, ties to even), as float64."""
    return np.asarray(x).astype(_NUMPY[storage]).astype(np.float64)


def storage_hook(storage: str, compute=None, fused: frozenset[str] = frozenset()):
    """The hook that stores every op output and every weight in ``storage``, after ``compute``
    (a noise hook: the engine's float32 rounding of that op) where given. A product's input is left
    as it is (an op output already stored), and so is the output of an op in ``fused``, which the
    engine computes inside another op and never stores (``Engine.fused``)."""
    def hook(site: Site, x: np.ndarray) -> np.ndarray:
        if site.op == "matmul_input":
            return x
        if compute is not None:
            x = compute(site, x)
        return x if site.op in fused else rounded(x, storage)
    return hook


@dataclass(frozen=True)
class Matched:
    storage: str
    reference: Forward
    """The oracle's pass with ``storage`` rounding at every tensor."""
    tensors: dict[str, float]
    """Per named tensor, the largest RMS relative change float32 compute made to it over the runs."""

    def tensor_bounds(self) -> dict[str, float]:
        u = UNIT_ROUNDOFF[self.storage]
        return {k: MARGIN * v + u for k, v in self.tensors.items()}


def _rms_rel(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300))


def matched(model: Model, tokens: Sequence[int], storage: str, *, fused: frozenset[str] = frozenset(),
            runs: int = RUNS, seed: int = 0, compute: Engine = COMPUTE) -> Matched:
    """The ``storage``-matched reference of ``model`` on ``tokens`` and its residual envelope
    (``fused``: the ops whose outputs the engine does not store; ``compute``: the engine's
    arithmetic between two stores, ``error_model.compute_model``: float32 by default, plus the
    steps an engine rounds inside its ops)."""
    if storage not in _NUMPY:
        raise ValueError(f"storage must be one of {', '.join(STORAGE)}, got {storage!r}")
    ref = forward(model, tokens, hook=storage_hook(storage, fused=fused))
    rel = {k: 0.0 for k in ref.tensors}
    with np.errstate(over="ignore"):  # a value past the storage range is inf in the engine too
        for r in range(runs):
            noise = noise_hook(compute, np.random.default_rng([seed, r]))
            noisy = forward(model, tokens, hook=storage_hook(storage, noise, fused))
            for k in rel:
                rel[k] = max(rel[k], _rms_rel(noisy.tensors[k], ref.tensors[k]))
    return Matched(storage, ref, rel)


def rows(m: Matched, tensors: Mapping[str, np.ndarray]) -> list[Row]:
    """A run's tensors against the matched reference, each with its residual bound: ``rel_err``
    holds the RMS relative error, the quantity the bound is on."""
    return [dataclasses.replace(r, rel_err=r.rms_rel if np.isfinite(r.rel_err) else r.rel_err)
            for r in compare(m.reference.tensors, tensors, m.tensor_bounds())[0]]


def worst(rs: Sequence[Row]) -> tuple[str, float]:
    """(tensor, rel_err / bound) of the row furthest past (or closest to) its bound."""
    def ratio(r: Row) -> float:
        return math.inf if math.isnan(r.rel_err) else (r.rel_err / r.threshold if r.threshold > 0 else math.inf)
    r = max(rs, key=ratio)
    return r.name, ratio(r)


@dataclass(frozen=True)
class Explanation:
    ratios: dict[str, tuple[str, float]]
    """Per storage precision: (the tensor furthest from the matched reference, ×its residual bound)."""

    @property
    def best(self) -> str:
        """The finest storage precision whose residual explains the run (a run a finer precision
        explains is explained by a coarser one too: its residual admits a whole storage step per
        tensor), else the one that comes closest."""
        fits = [s for s in STORAGE if s in self.ratios and self.ratios[s][1] <= 1.0]
        return fits[0] if fits else min(self.ratios, key=lambda s: self.ratios[s][1])

    @property
    def consistent(self) -> bool:
        return self.ratios[self.best][1] <= 1.0

    def line(self) -> str:
        others = ", ".join(f"{s} ×{r:.3g} at {t}" for s, (t, r) in self.ratios.items() if s != self.best)
        t, r = self.ratios[self.best]
        if self.consistent:
            return f"precision: consistent with a {self.best} engine (×{r:.3g} its residual bound at worst, {t}; {others})"
        return f"precision: inconsistent with any storage precision (closest: {self.best}, ×{r:.3g} at {t}; {others})"


def explain(references: Mapping[str, Matched], tensors: Mapping[str, np.ndarray]) -> Explanation:
    """Which storage precision's matched reference explains the run's tensors."""
    return Explanation({s: worst(rows(m, tensors)) for s, m in references.items()})
