"""The sections the suite's own tables feed, registered by area. Sections for areas still being
built (conforming implementations, backend sampling, whole-model parity) are registered with the
table names they will read, so the page says "not run" until their tests record them."""
from __future__ import annotations

from typing import Any

from reports.engine_matrix import engine_matrix_section
from reports.order_matrix import order_matrix_section
from reports.precision import cosine_lies_section, ops_error_section
from reports.sampling_rules import sampling_rules_section
from reports.sections import Context, section
from reports.tables import esc, generic
from reports.zoo import is_zoo, zoo_section

TITLES = {  # titles and one-line explanations for tables drawn generically
    "llama_cpp_findings": ("llama.cpp peer findings",
                           "Where llama.cpp (via llama-cpp-python) and the float64 oracle disagree, "
                           "with the witness that shows it."),
    "llama_cpp_findings_chain": ("llama.cpp peer findings: sampler chains", ""),
    "llama_cpp_peer": ("llama.cpp peer agreement per sampler", ""),
    "quant_peer_findings": ("gguf-py peer findings (quantization formats)", ""),
    "stats_gate": ("Statistics gate calibration",
                   "How the statistical tests' thresholds were set and what false-failure rate and power "
                   "they were measured to have."),
    "distribution_gof": ("Sampling distributions: goodness of fit", ""),
    "split_same_seed_tokens": ("GPU-prefix / CPU-suffix split: same seed, same tokens", ""),
    "peer_engines": ("Real engines judged as peers, with their pinned releases",
                     "Each engine's sampler run for real on CPU against its named variant and the llama.cpp "
                     "oracle (properties/peers/<engine>); their findings are in the ledger (logitcheck findings)."),
    "peer_transformers": ("HF transformers peer: warpers vs the oracle's transformers variant",
                          "Each HF warper (torch on CPU) and a generate-style chain on hypothesis-drawn rows. "
                          "identical_sets: examples where both zeroed the same tokens; tie_permuted: the sets "
                          "differed only in which of several equal scores was dropped (torch.sort is not stable); "
                          "boundary_bracketed: a threshold landed within the float32 rounding bracket; "
                          "max_prob_diff: largest probability difference; worst_u: largest error of a logit "
                          "transform, in units of u."),
    "speculative_exactness": ("Speculative sampling: the first token's law on the grid",
                              "Weighted counts of each checked token over the grid of acceptance and residual "
                              "uniforms, against N·p and the allowed deviation."),
    "calibration_speculative": ("Speculative sampling mutants: kills", "Each mutant hunted with the pinned corners "
                                "first, then its witness replayed."),
    "calibration_speculative_drawn": ("Speculative sampling mutants: kills from drawn cases only",
                                      "The same mutants hunted without the corners: what the strategies find alone."),
    "calibration_logprobs": ("Logprob mutants: kills", ""),
    "llama_cpp_post_sampling_logprobs": ("llama.cpp post-sampling probabilities vs the oracle's llama.cpp-server "
                                         "logprobs", ""),
    "transformers_logprobs": ("transformers' generate scores vs the oracle's logprobs",
                              "A tiny random Llama sampled by generate() under each warper setting: raw and "
                              "processed logprobs and the oracle's transformers variant, worst error in u against "
                              "the log-softmax model's allowance."),
    "batch_invariance": ("Batch invariance per op",
                         "Whether each op's rows came out bitwise equal for every batch size and row order drawn "
                         "(observed), whether the implementation claims it, and whether the run's contract "
                         "demanded it."),
}


def titled(name: str, value: Any) -> str:
    """One table drawn generically under its title."""
    title, intro = TITLES.get(name, (name.replace("_", " ").capitalize(), ""))
    intro_html = f'<p class="muted">{esc(intro)}</p>' if intro else ""
    return f'<section id="table-{esc(name)}"><h3>{esc(title)}</h3>{intro_html}{generic(value)}</section>'


def tables_matching(ctx: Context, anchor: str) -> list[str]:
    from reports.sections import SECTIONS

    s = next(s for s in SECTIONS if s.anchor == anchor)
    return sorted(n for n in ctx.tables if s.claims(n))


@section("order-matrix", "Order matrix", area="samplers", tables=("order_matrix",), order=20)
def _order(ctx: Context) -> str:
    return order_matrix_section(ctx.tables["order_matrix"])


@section("sampler-tables", "Sampler distributions and splits", area="samplers", order=30,
         tables=("distribution_gof", "split_same_seed_tokens", "handoff_divergence_*"))
def _sampler_tables(ctx: Context) -> str:
    return "".join(titled(n, ctx.tables[n]) for n in tables_matching(ctx, "sampler-tables"))


SPECULATIVE = ("speculative_exactness", "calibration_speculative", "calibration_speculative_drawn")
LOGPROBS = ("calibration_logprobs", "llama_cpp_post_sampling_logprobs", "transformers_logprobs")


@section("speculative", "Speculative sampling", area="samplers", order=40, tables=SPECULATIVE)
def _speculative(ctx: Context) -> str:
    return "".join(titled(n, ctx.tables[n]) for n in SPECULATIVE if n in ctx.tables)


@section("logprobs", "Logprobs", area="samplers", order=50, tables=LOGPROBS)
def _logprobs(ctx: Context) -> str:
    return "".join(titled(n, ctx.tables[n]) for n in LOGPROBS if n in ctx.tables)


@section("batch-invariance", "Batch invariance", area="ops", tables=("batch_invariance",), order=40)
def _batch_invariance(ctx: Context) -> str:
    return titled("batch_invariance", ctx.tables["batch_invariance"])


@section("table-ops_error_u", "Op precision", area="ops", tables=("ops_error_u",), order=20)
def _ops(ctx: Context) -> str:
    return ops_error_section(ctx.tables["ops_error_u"], ctx.worst_error)


@section("table-cosine_lies", "Cosine lies", area="ops", tables=("cosine_lies",), order=30)
def _cosine(ctx: Context) -> str:
    return cosine_lies_section(ctx.tables["cosine_lies"])


@section("engine-matrix", "Engine matrix", area="engines", tables=("engine_matrix", "engine_matrix_max_tvd"), order=20)
def _engines(ctx: Context) -> str:
    return engine_matrix_section(ctx.tables)


@section("table-engine_sampling_rules", "Engine sampling rules", area="engines", tables=("engine_sampling_rules",),
         order=30)
def _rules(ctx: Context) -> str:
    return sampling_rules_section(ctx.tables["engine_sampling_rules"])


@section("peer-findings", "Peer findings", area="peers", order=20,
         tables=("llama_cpp_findings*", "llama_cpp_peer", "quant_peer_findings", "peer_transformers", "peer_engines"))
def _peers(ctx: Context) -> str:
    names = tables_matching(ctx, "peer-findings")
    return "".join(titled(n, ctx.tables[n]) for n in sorted(names, key=lambda n: (n != "llama_cpp_findings", n)))


@section("zoo", "Bug zoo: mutants the suite must kill", area="zoo", tables=("zoo", "*_zoo", "zoo_*"), order=20)
def _zoo(ctx: Context) -> str:
    names = sorted((n for n in ctx.tables if is_zoo(n)), key=lambda n: (n not in ("zoo", "zoo_samplers"), n))
    return "".join(zoo_section(n, ctx.tables[n], ctx.tests) for n in names)


@section("gpu-backend", "Backend sampling on the device", area="gpu", order=20,
         tables=("backend_sampling*", "gpu_*", "device_*"))
def _gpu(ctx: Context) -> str:
    return "".join(titled(n, ctx.tables[n]) for n in tables_matching(ctx, "gpu-backend"))


@section("table-stats_gate", "Statistics gate calibration", area="judge", tables=("stats_gate",), order=20)
def _stats(ctx: Context) -> str:
    return titled("stats_gate", ctx.tables["stats_gate"])
