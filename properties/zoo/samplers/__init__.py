"""The sampler bug zoo: each mutant is gpu_impl with one function replaced by a version carrying
one known engine bug (``truncation_bugs``, ``value_bugs``); ``DOMAIN`` hands them, with every
sampler property of ``properties.samplers.suite``, to ``properties/zoo/runner.py``.

Properties run in a fixed order: per record, impl ≡ oracle in float32, the same body on
exact-mass boundary rows, impl ≡ oracle in fp16 and bf16, the no-op / monotone / min_keep
invariants; then the softmax invariants, the distribution gate and the row contract (batch
invariance, bad rows). A mutant draws vocabularies of at most 4,096 tokens unless its bug needs
more.

Decisions a reader may want stated:

* softmax(l)/T: dividing probabilities by T and renormalising is the identity, and p^(1/T)
  renormalised *is* softmax(l/T). The realistic bug is therefore "temperature has no effect":
  an engine that applies T to a probability buffer which the next renormalisation undoes, and
  passes the logits on untouched (``temp_on_probabilities``). ``temp_multiplies`` is the other
  common slip, l·T.
* greedy returning a position: in a fixed-shape world the reordering happens in the filter. The
  ``top_k_compacts`` mutant writes the survivors sorted to the front of the row, as a sort-based
  kernel lays them out; a correct greedy then returns position 0 of that row, not the token id.
  The survivor check sees the wrong positions directly.
* no renormalisation before dist: a fixed-shape dist only sees the masked row, so the missing
  normaliser is that row's sum S = sum exp(l - max) (u is compared with a CDF of total S, not 1);
  the "pre-filter softmax zeroed by the filter" variant is the same bug with total M < 1.
* ">= versus >" mutants (top_p_strict, typical_ge, min_p_strict, xtc_strict) differ from the
  real function only when a mass or probability equals p exactly. typical_ge and xtc_strict
  wrap the real function with p moved one float32 step, which on float32 sums is exactly the
  flipped comparison.
* min_p on the un-tempered logits after temp is an ordering bug between two functions (the
  order matrix judges sampler order on the oracle); it has no single-function form here.
"""
from __future__ import annotations

import types

from properties.samplers.records import SamplerRecord, sampler_records
from properties.samplers.suite import (EXACT_BOUNDARY, IMPL_VS_ORACLE, MIN_KEEP, MONOTONE, NOOP, RECORD_FREE,
                                       ROW_CONTRACT)
from properties.zoo.runner import Domain, Mutant, Property, replaced
from properties.zoo.samplers import truncation_bugs as tb, value_bugs as vb
from properties.zoo.samplers.truncation_bugs import Factory

SCOPE = {"min_vocab": 1, "max_vocab": 4096}


def mutant_module(base: types.ModuleType, fn: str, factory: Factory) -> types.ModuleType:
    """``base``'s full public API with ``fn`` swapped for ``factory(base)``."""
    api = getattr(base, "__all__", None) or [k for k in dir(base) if not k.startswith("_")]
    if fn not in api:
        raise ValueError(f"a mutant replaces {fn}, which {base.__name__} lacks")
    mod = types.ModuleType(f"{base.__name__}[{fn} mutated]")
    mod.__dict__.update({k: getattr(base, k) for k in api})
    mod.__all__ = list(api)
    setattr(mod, fn, factory(base))
    return mod


def _mutant(name: str, description: str, fn: str, factory: Factory, scope: dict | None = None) -> Mutant:
    return Mutant(name, description, frozenset({fn}), replaced(lambda base: mutant_module(base, fn, factory)),
                  {**SCOPE, **(scope or {})})


def _point(prop: Property, record: SamplerRecord | None, dtype: str) -> Property:
    name = f"{prop.name}[{record.name}/{dtype}]" if record else f"{prop.name}[{prop.subject}]"
    return prop.at((record, dtype), name)


def properties() -> list[Property]:
    """Every sampler property at every (record, dtype) point, in the order above."""
    records = sampler_records(impl_only=True)
    out = []
    for r in records:
        first, *rest = r.dtypes
        points = [(IMPL_VS_ORACLE, first)] + [(EXACT_BOUNDARY, "float32")] * EXACT_BOUNDARY.applies(r)
        points += [(IMPL_VS_ORACLE, d) for d in rest] + [(p, "float32") for p in (NOOP, MONOTONE, MIN_KEEP)
                                                         if p.applies(r)]
        out += [_point(p, r, d) for p, d in points]
    out += [_point(p, None, "float32") for p in RECORD_FREE]
    out += [_point(p, r, "float32") for r in records for p in ROW_CONTRACT if p.applies(r)]
    return out


MUTANTS: tuple[Mutant, ...] = (
    _mutant("top_p_on_logits", "top_p accumulates the sorted raw logits instead of their softmax probabilities",
           "top_p", tb.top_p_on_logits),
    _mutant("softmax_top1000", "softmax normalised over the 1000 largest weights only (visible for vocab > 1000)",
           "softmax", vb.softmax_top1000, scope={"min_vocab": 1001}),
    _mutant("temp_on_probabilities", "temperature applied as p/T to probabilities and renormalised away: "
           "t > 0 has no effect on the logits", "temp", vb.temp_on_probabilities),
    _mutant("temp_multiplies", "temperature multiplies the logits (l·t) instead of dividing", "temp",
           vb.temp_multiplies),
    _mutant("temp_divides_by_zero", "no t <= 0 branch: l / 0 gives ±inf and NaN, l / -1 flips the row",
           "temp", vb.temp_divides_by_zero),
    _mutant("top_p_mass_le_p", "top_p keeps the largest prefix with mass <= p: the crossing token is dropped",
           "top_p", tb.top_p_mass_le_p),
    _mutant("top_p_strict", "top_p stops at the first cumulative mass > p instead of >= p (one token too "
           "many when the mass hits p exactly)", "top_p", tb.top_p_strict),
    _mutant("top_p_ignores_min_keep", "top_p never forwards min_keep", "top_p", tb.top_p_ignores_min_keep),
    _mutant("top_k_keeps_ties", "top_k keeps every token equal to the k-th value (more than k tokens)",
           "top_k", tb.top_k_keeps_ties),
    _mutant("top_k_reads_past_end", "top_k with k > V reads the k-th value past the sorted row (a 0.0 in "
           "scratch memory) and drops every negative logit", "top_k", tb.top_k_reads_past_end),
    _mutant("top_k_compacts", "top_k writes the survivors sorted to the front of the row, so greedy then "
           "returns position 0 instead of the token id", "top_k", tb.top_k_compacts),
    _mutant("min_p_strict", "min_p keeps l > max + ln p (strict) instead of >=", "min_p", tb.min_p_strict),
    _mutant("typical_ge", "typical stops at the first cumulative mass >= p instead of > p", "typical",
           tb.typical_ge),
    _mutant("top_n_sigma_sample_std", "top_n_sigma uses the sample std (divides by n - 1)", "top_n_sigma",
           tb.top_n_sigma_sample_std),
    _mutant("xtc_removes_all", "xtc removes every above-threshold token, the least probable one included",
           "xtc", tb.xtc_removes_all),
    _mutant("xtc_strict", "xtc removes tokens with p > threshold instead of >=", "xtc", tb.xtc_strict),
    _mutant("dist_fp16_cdf", "dist accumulates the CDF of probabilities in fp16", "dist", vb.dist_fp16_cdf),
    _mutant("dist_unnormalised_cdf", "dist compares u with an unnormalised CDF (no renormalisation after "
           "a filter)", "dist", vb.dist_unnormalised_cdf),
    _mutant("dist_first_uniform", "dist uses row 0's uniform for every row of the batch", "dist",
           vb.dist_first_uniform),
    _mutant("dist_nan_out_of_range", "dist on a NaN row returns V (one past the end) instead of raising",
           "dist", vb.dist_nan_out_of_range),
    _mutant("greedy_nan_minus_one", "greedy on a NaN row returns -1 instead of raising", "greedy",
           vb.greedy_nan_minus_one),
    _mutant("repeat_divides_negative", "repeat penalty divides negative logits instead of multiplying them",
           "penalties", vb.repeat_divides_negative),
    _mutant("penalties_whole_history", "penalties count the whole history, ignoring last_n", "penalties",
           vb.penalties_whole_history),
    _mutant("logit_bias_wrong_row", "logit_bias applies row b-1's bias to row b of the batch", "logit_bias",
           vb.logit_bias_wrong_row),
)

DOMAIN = Domain("samplers", "gpu_impl", properties, MUTANTS, SCOPE)
