"""The public bug zoo for samplers: each mutant is gpu_impl with one function replaced by a
version carrying one known engine bug. ``mutant_module(name)`` builds the module;
``properties/zoo/runner.py`` runs the suite's property bodies against it.

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

import importlib
import types
from dataclasses import dataclass

from properties.zoo import truncation_bugs as tb
from properties.zoo import value_bugs as vb
from properties.zoo.truncation_bugs import Factory


@dataclass(frozen=True)
class Mutant:
    name: str
    description: str
    replaces: str
    """The gpu_impl function the bug replaces."""
    build: Factory
    min_vocab: int = 1
    max_vocab: int = 4096
    """Vocabulary range the runner draws from: small unless the bug needs more."""

    def __repr__(self) -> str:
        return self.name


MUTANTS: tuple[Mutant, ...] = (
    Mutant("top_p_on_logits", "top_p accumulates the sorted raw logits instead of their softmax probabilities",
           "top_p", tb.top_p_on_logits),
    Mutant("softmax_top1000", "softmax normalised over the 1000 largest weights only (visible for vocab > 1000)",
           "softmax", vb.softmax_top1000, min_vocab=1001),
    Mutant("temp_on_probabilities", "temperature applied as p/T to probabilities and renormalised away: "
           "t > 0 has no effect on the logits", "temp", vb.temp_on_probabilities),
    Mutant("temp_multiplies", "temperature multiplies the logits (l·t) instead of dividing", "temp",
           vb.temp_multiplies),
    Mutant("temp_divides_by_zero", "no t <= 0 branch: l / 0 gives ±inf and NaN, l / -1 flips the row",
           "temp", vb.temp_divides_by_zero),
    Mutant("top_p_mass_le_p", "top_p keeps the largest prefix with mass <= p: the crossing token is dropped",
           "top_p", tb.top_p_mass_le_p),
    Mutant("top_p_strict", "top_p stops at the first cumulative mass > p instead of >= p (one token too "
           "many when the mass hits p exactly)", "top_p", tb.top_p_strict),
    Mutant("top_p_ignores_min_keep", "top_p never forwards min_keep", "top_p", tb.top_p_ignores_min_keep),
    Mutant("top_k_keeps_ties", "top_k keeps every token equal to the k-th value (more than k tokens)",
           "top_k", tb.top_k_keeps_ties),
    Mutant("top_k_reads_past_end", "top_k with k > V reads the k-th value past the sorted row (a 0.0 in "
           "scratch memory) and drops every negative logit", "top_k", tb.top_k_reads_past_end),
    Mutant("top_k_compacts", "top_k writes the survivors sorted to the front of the row, so greedy then "
           "returns position 0 instead of the token id", "top_k", tb.top_k_compacts),
    Mutant("min_p_strict", "min_p keeps l > max + ln p (strict) instead of >=", "min_p", tb.min_p_strict),
    Mutant("typical_ge", "typical stops at the first cumulative mass >= p instead of > p", "typical",
           tb.typical_ge),
    Mutant("top_n_sigma_sample_std", "top_n_sigma uses the sample std (divides by n - 1)", "top_n_sigma",
           tb.top_n_sigma_sample_std),
    Mutant("xtc_removes_all", "xtc removes every above-threshold token, the least probable one included",
           "xtc", tb.xtc_removes_all),
    Mutant("xtc_strict", "xtc removes tokens with p > threshold instead of >=", "xtc", tb.xtc_strict),
    Mutant("dist_fp16_cdf", "dist accumulates the CDF of probabilities in fp16", "dist", vb.dist_fp16_cdf),
    Mutant("dist_unnormalised_cdf", "dist compares u with an unnormalised CDF (no renormalisation after "
           "a filter)", "dist", vb.dist_unnormalised_cdf),
    Mutant("dist_first_uniform", "dist uses row 0's uniform for every row of the batch", "dist",
           vb.dist_first_uniform),
    Mutant("dist_nan_out_of_range", "dist on a NaN row returns V (one past the end) instead of raising",
           "dist", vb.dist_nan_out_of_range),
    Mutant("greedy_nan_minus_one", "greedy on a NaN row returns -1 instead of raising", "greedy",
           vb.greedy_nan_minus_one),
    Mutant("repeat_divides_negative", "repeat penalty divides negative logits instead of multiplying them",
           "penalties", vb.repeat_divides_negative),
    Mutant("penalties_whole_history", "penalties count the whole history, ignoring last_n", "penalties",
           vb.penalties_whole_history),
    Mutant("logit_bias_wrong_row", "logit_bias applies row b-1's bias to row b of the batch", "logit_bias",
           vb.logit_bias_wrong_row),
)
MUTANTS_BY_NAME = {m.name: m for m in MUTANTS}


def mutant_module(name: str, base: types.ModuleType | str = "gpu_impl") -> types.ModuleType:
    """``base``'s full public API with the mutant's one function swapped; ``name`` may be
    ``"none"`` for the unmutated control."""
    module = importlib.import_module(base) if isinstance(base, str) else base
    api = getattr(module, "__all__", None) or [k for k in dir(module) if not k.startswith("_")]
    mod = types.ModuleType(f"{module.__name__}[{name}]")
    mod.__dict__.update({k: getattr(module, k) for k in api})
    mod.__all__ = list(api)
    if name != "none":
        mutant = MUTANTS_BY_NAME[name]
        if mutant.replaces not in api:
            raise ValueError(f"mutant {name} replaces {mutant.replaces}, which {module.__name__} lacks")
        setattr(mod, mutant.replaces, mutant.build(module))
    return mod
