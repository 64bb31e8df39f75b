//! The judged API (gpu_impl's function names and arguments) on top of the engine: each dense
//! `[batch, vocab]` row becomes a candidate array, runs through a sampler built from that row's
//! parameters, and is written back as a dense row (filters) or a token id (selectors).

mod chain;
mod ops;
mod rows;
mod samplers;

use crate::args::Args;
use crate::error::{Error, Result};
use crate::protocol::Array;

/// What the handshake announces, in this order.
pub const FUNCTIONS: &[&str] = &[
    "softmax",
    "greedy",
    "dist",
    "temp",
    "top_k",
    "top_p",
    "min_p",
    "typical",
    "penalties",
    "logit_bias",
    "engines.llama_cpp_chain",
    "engines.llama_cpp_chain_dist",
    "ops.softmax",
    "ops.rms_norm",
    "ops.rope",
];

/// Bad input is refused (never computed on), and the ops stay right past float32 overflow of
/// intermediate sums (reductions accumulate in float64).
pub const CLAIMS: &[&str] = &["refuses_bad_input", "overflow_safe"];

pub fn call(function: &str, args: &Args) -> Result<Vec<Array>> {
    let result = match function {
        "softmax" => samplers::softmax(args),
        "greedy" => samplers::greedy(args),
        "dist" => samplers::dist(args),
        "temp" => samplers::temp(args),
        "top_k" => samplers::top_k(args),
        "top_p" => samplers::top_p(args),
        "min_p" => samplers::min_p(args),
        "typical" => samplers::typical(args),
        "penalties" => samplers::penalties(args),
        "logit_bias" => samplers::logit_bias(args),
        "engines.llama_cpp_chain" => chain::llama_cpp_chain(args, false),
        "engines.llama_cpp_chain_dist" => chain::llama_cpp_chain(args, true),
        "ops.softmax" => ops::softmax(args),
        "ops.rms_norm" => ops::rms_norm(args),
        "ops.rope" => ops::rope(args),
        other => Err(Error::Unsupported(format!("{other} is not implemented by this harness"))),
    };
    result.map(|a| vec![a])
}
