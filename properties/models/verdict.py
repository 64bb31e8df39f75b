"""Drift or bug, in words: the verdict of a layer-by-layer comparison judged against an engine's
error model (``error_model.envelope``), and how much each layer's norms amplify what reaches them.

A correct engine computing in another order or precision leaves every tensor within the bound its
error model gives it, however far the final logits drift: large RMSNorm weights multiply the error
that reaches them, and the Monte Carlo envelope, run through the same weights, multiplies its
bounds alike. A structural bug (an op missing, misplaced, transposed) enters at one tensor and is
past that tensor's bound there. So the verdict is one of

* "within the <engine> error model of this engine at every tensor" (with the tensor that came
  closest, as a fraction of its bound), or
* "structural: first tensor past its bound: <name>, ×N its bound".

Per layer it states the norm weights (max |w|, rms(w)) and the gain the error model measures
through each norm: the envelope's relative error of the norm's output over that of its input.
A gain well above 1 is the model amplifying rounding, which the bounds already carry.

For an engine that stores in float16 or bfloat16 the verdict also reads the run against the
precision-matched reference (properties/models/matched.py: the oracle with the engine's storage
rounding at every tensor) under its residual bound, and a tensor is past its bound when it is past
either: the float64 bound admits the propagated storage rounding, which a bug of the same size hides
in; against the matched reference that rounding is no longer error (``judge_both``).

Both still admit the drift that reached a tensor. The local replay (properties/models/replay.py)
recomputes each dumped tensor from the dump's own inputs and bounds only the error of its own ops,
so a bug smaller than the admitted drift (exact GELU, a softcap of 15 for 30, on the drift models) is
flagged where it enters; a tensor is past its bound when it is past any of the three.
"""
from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

from fixtures import drift_model as drift_fixture, goldens
from oracle.models import Model, load_model
from oracle.models.layers import Row, compare, split_name
from properties.models import matched as M
from properties.models.error_model import ENGINES, Envelope, envelope
from properties.models.replay import Replay, replay

# graph op of a norm's output -> (its weight below "blk.<i>.", the graph op of its input; "" for
# the previous layer's residual stream)
NORMS = {
    "attn_norm": ("attn_norm.weight", ""),
    "attn_post_norm": ("post_attention_norm.weight", "attn_out"),
    "ffn_norm": ("ffn_norm.weight", "sa_out|ffn_inp"),
    "ffn_post_norm": ("post_ffw_norm.weight", "ffn_out"),
    "per_layer_embd_out": ("post_norm.weight", "pe_proj"),  # gemma4 / gemma3n: the per-layer embedding's norm
}
FINAL_NORM = ("result_norm", "output_norm.weight")


@dataclass(frozen=True)
class NormGain:
    tensor: str
    """The norm's output under its graph name (``attn_norm-3``)."""
    weight: str
    max_abs: float
    rms: float
    gain: float | None
    """Envelope relative error of the output / of the input (None: no envelope or no input)."""


@dataclass(frozen=True)
class LayerAmplification:
    layer: int
    """The block (-1 for the final norm)."""
    norms: tuple[NormGain, ...]

    @property
    def max_abs(self) -> float:
        return max(n.max_abs for n in self.norms)

    @property
    def rms(self) -> float:
        return max(n.rms for n in self.norms)

    @property
    def gain(self) -> float | None:
        g = [n.gain for n in self.norms if n.gain is not None]
        return max(g) if g else None


@dataclass(frozen=True)
class Verdict:
    engine: str
    first: str | None
    """The first tensor in graph order past its bound (None: every tensor within)."""
    ratio: float
    """rel_err / bound at ``first``; when within, the largest over all tensors."""
    closest: str
    """Where that largest ratio was (``first`` when structural)."""
    layers: tuple[LayerAmplification, ...] = ()
    matched: str = ""
    """The storage precision of the matched reference also read ("": none)."""
    matched_closest: str = ""
    matched_ratio: float = 0.0
    """Against the matched reference: the tensor closest to (or first past) its residual bound, and
    rel_err / bound there."""
    by_matched: bool = False
    """Structural by the matched reference's residual bound (the float64 bound holds there)."""
    replayed: bool = False
    """The local replay (properties/models/replay.py) was also read."""
    local_closest: str = ""
    local_ratio: float = 0.0
    """In the local replay: the tensor closest to (or first past) its bound, and its ratio."""
    by_local: bool = False
    """Structural by the local replay's bound alone (the float64 and matched bounds hold there)."""
    local_detail: str = ""
    """The local replay's row at ``first`` (``LocalRow.line``) when ``by_local``."""

    @property
    def structural(self) -> bool:
        return self.first is not None

    def line(self) -> str:
        if self.structural:
            by = f" (the matched {self.matched} reference's residual bound)" if self.by_matched else \
                (f" (the local replay from the dump's own inputs: {self.local_detail})" if self.by_local else "")
            return f"structural: first tensor past its bound: {self.first}, ×{_num(self.ratio)} its bound{by}"
        also = (f"; within the matched {self.matched} reference's residual at every tensor (closest: "
                f"{self.matched_closest} at ×{_num(self.matched_ratio)})") if self.matched else ""
        if self.replayed:
            also += (f"; within the local replay at every tensor (closest: {self.local_closest} at "
                     f"×{_num(self.local_ratio)})")
        return (f"within the {self.engine} error model of this engine at every tensor "
                f"(closest: {self.closest} at ×{_num(self.ratio)} its bound){also}")

    def lines(self) -> list[str]:
        """The verdict, then one line per layer with norms: weights and the measured gain."""
        out = [f"verdict: {self.line()}"]
        for la in self.layers:
            where = "final norm" if la.layer < 0 else f"layer {la.layer}"
            gains = ", ".join(f"{split_name(n.tensor)[0]} ×{_num(n.gain)}" for n in la.norms if n.gain is not None)
            out.append(f"{where}: norm weights max|w| {_num(la.max_abs)}, rms(w) {_num(la.rms)}"
                       + (f"; error gain through the norm (error model): {gains}" if gains else ""))
        return out


def _num(x: float | None) -> str:
    return "?" if x is None else (f"{x:.3g}" if math.isfinite(x) else str(x))


def _ratio(r: Row) -> float:
    if r.threshold > 0:
        return r.rel_err / r.threshold if not math.isnan(r.rel_err) else math.inf
    return 0.0 if r.rel_err == 0 else math.inf


def _input_of(op: str, layer: int, n_layer: int, env: Mapping[str, float]) -> str | None:
    """The graph name of the tensor a norm reads, where the pass names it."""
    if op == "result_norm":
        return f"l_out-{n_layer - 1}"
    src = NORMS[op][1]
    if src == "":
        return f"l_out-{layer - 1}" if layer > 0 else next((n for n in ("inp_scaled", "embd") if n in env), None)
    return next((f"{s}-{layer}" for s in src.split("|") if f"{s}-{layer}" in env), None)


def amplification(norm_weights: Mapping[str, np.ndarray],
                  envelope_tensors: Mapping[str, float] | None = None) -> tuple[LayerAmplification, ...]:
    """Per layer, each norm's weights and (with the envelope's per-tensor relative errors) the
    error gain through it. ``norm_weights``: GGUF name -> weight, e.g. ``blk.3.ffn_norm.weight``."""
    env = envelope_tensors or {}
    layers = sorted({int(m.group(1)) for n in norm_weights if (m := re.match(r"blk\.(\d+)\.", n))})
    n_layer = layers[-1] + 1 if layers else 0
    named = [(f"{op}-{i}", f"blk.{i}.{w}", op, i) for i in layers for op, (w, _) in NORMS.items()]
    named.append((FINAL_NORM[0], FINAL_NORM[1], FINAL_NORM[0], -1))
    per: dict[int, list[NormGain]] = {}
    for tensor, weight, op, i in named:
        if weight not in norm_weights:
            continue
        w = np.abs(np.asarray(norm_weights[weight], np.float64))
        src = _input_of(op, i, n_layer, env)
        gain = env[tensor] / env[src] if tensor in env and src in env and env[src] > 0 else None
        per.setdefault(i, []).append(NormGain(tensor, weight, float(w.max()), float(np.sqrt((w * w).mean())), gain))
    return tuple(LayerAmplification(i, tuple(per[i])) for i in sorted(per, key=lambda i: (i < 0, i)))


def judge(rows: Sequence[Row], engine: str, norm_weights: Mapping[str, np.ndarray] | None = None,
          envelope_tensors: Mapping[str, float] | None = None) -> Verdict:
    """``rows``: ``oracle.models.layers.compare`` of the oracle's run (REF) and the engine's,
    thresholds from ``engine``'s error model (``Envelope.tensor_bounds``)."""
    if not rows:
        raise ValueError("no tensor to judge")
    layers = amplification(norm_weights, envelope_tensors) if norm_weights else ()
    first = next((r for r in rows if r.exceeds), None)
    if first is not None:
        return Verdict(engine, first.name, _ratio(first), first.name, layers)
    worst = max(rows, key=_ratio)
    return Verdict(engine, None, _ratio(worst), worst.name, layers)


def judge_both(rows: Sequence[Row], matched_rows: Sequence[Row], engine: str, storage: str,
               norm_weights: Mapping[str, np.ndarray] | None = None,
               envelope_tensors: Mapping[str, float] | None = None, local: "Replay | None" = None) -> Verdict:
    """``judge`` with the matched reference's rows (``matched.rows``; none: not read) and the local
    replay (``replay.replay``; None: not read) as further bounds: the first tensor in graph order
    past any of them is where the bug enters."""
    if not rows:
        raise ValueError("no tensor to judge")
    layers = amplification(norm_weights, envelope_tensors) if norm_weights else ()
    by_name = {r.name: r for r in matched_rows}
    m_name, m_ratio = M.worst(matched_rows) if matched_rows else ("", 0.0)
    loc = local.by_name() if local is not None else {}
    lw = local.worst() if local is not None else None  # None too where no tensor could be replayed
    extra = dict(replayed=lw is not None, local_closest=lw.name if lw else "", local_ratio=lw.ratio if lw else 0.0)
    for r in rows:
        m, lr = by_name.get(r.name), loc.get(r.name)
        if r.exceeds or (m is not None and m.exceeds):
            by_m = not r.exceeds
            return Verdict(engine, r.name, _ratio(m if by_m else r), r.name, layers, storage, m_name, m_ratio, by_m,
                           **extra)
        if lr is not None and lr.exceeds:
            return Verdict(engine, r.name, lr.ratio, r.name, layers, storage, m_name, m_ratio, **extra,
                           by_local=True, local_detail=lr.line())
    worst = max(rows, key=_ratio)
    return Verdict(engine, None, _ratio(worst), worst.name, layers, storage, m_name, m_ratio, **extra)


def verdict_of(env: Envelope, engine: str, model: Model, tensors: Mapping[str, np.ndarray],
               matched_ref: "M.Matched | None" = None, local: "Replay | None" = None) -> Verdict:
    """A run's named tensors against the oracle's (``env.exact``) under ``engine``'s bounds, for an
    engine that stores below float32 against ``matched_ref`` (the matched reference of its storage
    precision) under its residual bounds, and against ``local`` (the replay of each tensor from
    the run's own inputs, ``replay.replay``) where given."""
    rows, _ = compare(env.exact.tensors, tensors, env.tensor_bounds())
    if matched_ref is None and local is None:
        return judge(rows, engine, model_norms(model), env.tensors)
    return judge_both(rows, M.rows(matched_ref, tensors) if matched_ref is not None else [], engine,
                      matched_ref.storage if matched_ref is not None else "", model_norms(model), env.tensors, local)


def needs_matched(engine: str) -> bool:
    """The engines whose verdict also reads the matched reference: those storing below float32
    (for float32 storage the float64 bound is already sized by float32 rounding alone)."""
    return ENGINES[engine].storage != "float32"


# ---- the drift fixture: a correct engine's drift on a model with Gemma-sized norm weights ----

@functools.lru_cache(maxsize=None)
def drift_path(arch: str = drift_fixture.ARCH) -> Path:
    """fixtures/drift_model of ``arch`` (gemma2 or gemma4 layout; seed 0), generated once into the
    fixtures cache."""
    return drift_fixture.ensure(seed=goldens.SEED, arch=arch)


@functools.lru_cache(maxsize=None)
def drift_model(arch: str = drift_fixture.ARCH) -> Model:
    return load_model(drift_path(arch))


@functools.lru_cache(maxsize=None)
def drift_envelope(engine: str, arch: str = drift_fixture.ARCH) -> Envelope:
    """``engine``'s error envelope on the drift model over the goldens' tokens (all at once)."""
    return envelope(drift_model(arch), goldens.tokens(), engine)


@functools.lru_cache(maxsize=None)
def drift_matched(storage: str, arch: str = drift_fixture.ARCH) -> M.Matched:
    """The ``storage``-matched reference of the drift model over the goldens' tokens, with the
    stores gpu_impl's engine of that precision makes (``Engine.fused``)."""
    return M.matched(drift_model(arch), goldens.tokens(), storage, fused=ENGINES[f"gpu_impl-{storage}"].fused)


def judge_run(env: Envelope, engine: str, model: Model, tensors: Mapping[str, np.ndarray],
              matched_ref: "M.Matched | None" = None, *, local: bool = True) -> Verdict:
    """A run's named tensors against the oracle's (``env.exact``) under ``engine``'s bounds, and
    ``matched_ref``'s residual bounds where given, and (``local``) the local replay of the run on
    the envelope's tokens, as ``logitcheck layers --error-model`` judges it (``verdict_of``)."""
    rep = replay(model, env.exact.tokens, tensors, engine) if local else None
    return verdict_of(env, engine, model, tensors, matched_ref, rep)


def model_norms(model: Model) -> dict[str, np.ndarray]:
    """Every RMSNorm weight of ``model`` by its GGUF name."""
    return {n: model.weight(n) for n in model.stored if n.endswith("norm.weight")}


def report_row(v: Verdict, parity: Mapping[str, object]) -> dict[str, object]:
    """One row of the report's drift-versus-bug tables: the final logits' agreement with the
    oracle (``oracle.models.parity`` summary) next to the verdict."""
    return {"final cosine (mean)": parity["cosine_mean"], "final cosine (min)": parity["cosine_min"],
            "same top-1": parity["same_top1"], "top-5 overlap": parity["topk_overlap"]["5"],
            "mean KLD": parity["mean_kld"], "cosine misleading": parity["cosine_misleading"],
            "verdict": "structural" if v.structural else "within", "tensor": v.first or v.closest,
            "x bound": v.ratio, "line": v.line()}
