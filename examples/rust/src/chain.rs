//! llama.cpp's default sampler chain (common_sampler with its default sequence, minus the
//! samplers this harness leaves out): penalties -> top_k -> top_p -> min_p -> temperature,
//! min_keep 0, optionally followed by dist.

use crate::candidates::Candidates;
use crate::samplers::{MinP, Penalties, Sampler, Temp, TopK, TopP};

/// One row's chain parameters.
pub struct ChainParams {
    pub penalties: Penalties,
    pub k: i64,
    pub p: f32,
    pub m: f32,
    pub t: f32,
}

/// The samplers of the chain, in the order they run.
fn samplers(params: ChainParams) -> Vec<Box<dyn Sampler>> {
    let ChainParams { penalties, k, p, m, t } = params;
    let penalties: Box<dyn Sampler> = Box::new(penalties);
    let top_k: Box<dyn Sampler> = Box::new(TopK { k });
    // FOUNDING BUG bug_top_p_stale_softmax: top_p reuses the probabilities computed before
    // penalties and top_k instead of recomputing them over the surviving candidates.
    let fresh_softmax = !cfg!(feature = "bug_top_p_stale_softmax");
    let top_p: Box<dyn Sampler> = Box::new(TopP { p, min_keep: 0, fresh_softmax });
    let min_p: Box<dyn Sampler> = Box::new(MinP { p: m, min_keep: 0 });
    let temp: Box<dyn Sampler> = Box::new(Temp { t });
    if cfg!(feature = "bug_temp_misplaced") {
        // FOUNDING BUG: temperature runs before the truncation samplers instead of last
        vec![penalties, temp, top_k, top_p, min_p]
    } else {
        vec![penalties, top_k, top_p, min_p, temp]
    }
}

/// Run the chain over one row's candidates.
pub fn run(cur: &mut Candidates, params: ChainParams) {
    if cfg!(feature = "bug_top_p_stale_softmax") {
        cur.softmax(); // the stale probabilities the buggy top_p will use
    }
    for s in samplers(params) {
        s.apply(cur);
    }
}
