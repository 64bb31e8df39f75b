"""The near-threshold mutant zoo: bugs of a few to a few thousand u, one ulp of a threshold, or
one subtle semantic slip. Every one must be killed by the suite's properties of its domain,
hunted by the one runner (``properties.zoo.runner.hunt``: ``NEAR[domain]`` are its ``Mutant``s);
``test_calibration_zoos.py`` asserts the kills, ``python -m properties.zoo.calibration`` prints
the kill rate and examples-to-kill.

``mutant_modules(name)`` gives (samplers module, ops module): gpu_impl and gpu_impl.ops with the
one replaced function. For a pytest run, ``--impl properties.zoo.near_threshold.selected`` with
``LOGITCHECK_NEAR_MUTANT=<name>`` imports the same pair.
"""
from __future__ import annotations

import importlib
import types
from dataclasses import dataclass
from typing import Callable

from properties.zoo.near_threshold import op_bugs as ob
from properties.zoo.near_threshold import sampler_bugs as sb
from properties.zoo.runner import Mutant, replaced, swapped


@dataclass(frozen=True)
class NearMutant:
    name: str
    domain: str
    """"samplers" (replaces a gpu_impl function) or "ops" (a gpu_impl.ops function)."""
    replaces: str
    build: Callable[[types.ModuleType], Callable]
    size: str
    """How wrong it is, in the units the judge should see it in."""
    contract: str = "default"
    """The contract under which it is a bug and must be killed (the default contract accepts a
    float32 running total for dist's CDF; strict demands llama.cpp's double sum)."""

    def __repr__(self) -> str:
        return self.name


S, O = "samplers", "ops"
NEAR_MUTANTS: tuple[NearMutant, ...] = (
    NearMutant("softmax_fp16_exp", S, "softmax", sb.softmax_fp16_exp,
               "exp argument and value in fp16: 2^-11 relative (4,096 u) plus |l - max|·2^-11"),
    NearMutant("softmax_no_max", S, "softmax", sb.softmax_no_max,
               "exact where exp(l) neither overflows (l > 88.7) nor underflows (l < -87.3); NaN or 0 beyond"),
    NearMutant("top_p_bf16_cumsum", S, "top_p", sb.top_p_bf16_cumsum,
               "the cumulative mass in bf16 (2^-9 per addition, stalling once p_i < ulp(cum)/2)"),
    NearMutant("top_p_fp16_probs", S, "top_p", sb.top_p_fp16_probs,
               "probabilities stored in fp16 before a float32 cumulative sum: 2^-11 (4,096 u) per term"),
    NearMutant("top_p_one_ulp_up", S, "top_p", sb.top_p_one_ulp_up,
               "p one float32 step up: visible only when the mass hits p exactly"),
    NearMutant("min_p_one_ulp_down", S, "min_p", sb.min_p_one_ulp_down,
               "threshold max + ln p one float32 step down: a token one ulp below it survives"),
    NearMutant("min_p_half_log", S, "min_p", sb.min_p_half_log,
               "ln p in fp16: the threshold off by |ln p - ln fp16(p)| (3.6e-4 at p = 0.05)"),
    NearMutant("top_k_one_ulp_down", S, "top_k", sb.top_k_one_ulp_down,
               "a token one ulp below the k-th logit survives too"),
    NearMutant("dist_bf16_probs", S, "dist", sb.dist_bf16_probs,
               "inverse CDF over bf16-rounded probabilities: 2^-9 relative per token (TVD 6-7e-4)"),
    NearMutant("dist_float_running_sum", S, "dist", sb.dist_float_running_sum,
               "llama.cpp's dist with its running sum in float, not double: a sequential float32 scan "
               "(γ_V drift, a stall after a spike) where the target S·u stays double; legal by default, "
               "a bug under strict", contract="strict"),
    NearMutant("mirostat_v2_stale_mu", S, "mirostat_v2", sb.mirostat_v2_stale_mu,
               "tokens right, the returned mu never updated"),
    NearMutant("mirostat_v2_surprise_before_renorm", S, "mirostat_v2", sb.mirostat_v2_surprise_before_renorm,
               "mu updated with the full-row surprise of the token, not the renormalised one"),
    NearMutant("matmul_tf32_inputs", O, "matmul", ob.matmul_tf32_inputs,
               "operands rounded to TF32: 2^-11 relative per operand, float32 accumulation"),
    NearMutant("matmul_bf16_inputs", O, "matmul", ob.matmul_bf16_inputs,
               "operands rounded to bf16: 2^-9 relative per operand (a no-op on bf16 inputs)"),
    NearMutant("rms_norm_fp16_accum", O, "rms_norm", ob.rms_norm_fp16_accum,
               "sum of squares in an fp16 accumulator: 2^-11 per addition, overflow past 65,504"),
    NearMutant("rms_norm_eps_outside_sqrt", O, "rms_norm", ob.rms_norm_eps_outside_sqrt,
               "x / (sqrt(mean x²) + eps): relative eps/(2 rms) on ordinary rows, large on tiny rows"),
    NearMutant("op_softmax_no_max", O, "softmax", ob.softmax_no_max,
               "op softmax without the max subtraction (float32)"),
    NearMutant("op_softmax_fp16_exp", O, "softmax", ob.softmax_fp16_exp, "op softmax with exp in fp16"),
    NearMutant("attention_scale_bf16", O, "attention", ob.attention_scale_bf16,
               "the 1/sqrt(d) scale rounded to bf16: scores off by up to 2^-9 relative"),
    NearMutant("attention_tile_no_rescale", O, "attention", ob.attention_tile_no_rescale,
               "64-key tiles, the accumulator not rescaled when a later tile raises the max (needs > 64 keys)"),
)
NEAR_BY_NAME = {m.name: m for m in NEAR_MUTANTS}


def _patched(base: str, label: str, replaced: dict[str, Callable]) -> types.ModuleType:
    module = importlib.import_module(base)
    mod = types.ModuleType(f"{base}[{label}]")
    mod.__dict__.update({k: getattr(module, k) for k in module.__all__})
    mod.__dict__.update(replaced)
    mod.__all__ = list(module.__all__)
    return mod


def _as_mutant(m: NearMutant) -> Mutant:
    """The runner's view: the domain's module with the one function swapped (whole vocabulary
    range: several of these bugs need large rows to show)."""
    def build(base: types.ModuleType) -> types.ModuleType:
        return swapped(base, m.name, **{m.replaces: m.build(base)})
    return Mutant(m.name, m.size, frozenset({m.replaces}), replaced(build),
                  {"min_vocab": 1, "max_vocab": 262144} if m.domain == S else {})


NEAR: dict[str, tuple[Mutant, ...]] = {d: tuple(_as_mutant(m) for m in NEAR_MUTANTS if m.domain == d) for d in (S, O)}
"""The near-threshold mutants as the runner hunts them, by domain."""


def mutant_modules(name: str) -> tuple[types.ModuleType, types.ModuleType]:
    """(gpu_impl, gpu_impl.ops) with mutant ``name``'s one function replaced."""
    m = NEAR_BY_NAME[name]
    base = "gpu_impl" if m.domain == S else "gpu_impl.ops"
    fn = m.build(importlib.import_module(base))
    samplers = _patched("gpu_impl", name, {m.replaces: fn} if m.domain == S else {})
    ops = _patched("gpu_impl.ops", name, {m.replaces: fn} if m.domain == O else {})
    return samplers, ops
