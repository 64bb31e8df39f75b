//! `engines.llama_cpp_chain` and `engines.llama_cpp_chain_dist`.

use super::rows::PenaltyArgs;
use crate::args::Args;
use crate::candidates::Candidates;
use crate::chain::{self, ChainParams};
use crate::error::{refuse, Result};
use crate::protocol::Array;
use crate::samplers::{Dist, Sampler};

pub fn llama_cpp_chain(args: &Args, then_dist: bool) -> Result<Array> {
    let x = args.logits("logits")?;
    let pa = PenaltyArgs::read(args, &x)?;
    let k = args.row_int("k", x.batch, None)?;
    let p = args.row_f32("p", x.batch)?;
    let m = args.row_f32("m", x.batch)?;
    let t = args.row_f32("t", x.batch)?;
    let u = if then_dist { Some(args.row_uniform("u", x.batch)?) } else { None };
    let mut out = vec![0.0f32; x.data.len()];
    let mut ids = Vec::with_capacity(x.batch);
    for (b, (row, dst)) in x.rows().zip(out.chunks_exact_mut(x.vocab)).enumerate() {
        let mut cur = Candidates::from_logits(row);
        let params = ChainParams { penalties: pa.sampler(b), k: k[b], p: p[b], m: m[b], t: t[b] };
        chain::run(&mut cur, params);
        match &u {
            None => cur.write_logits(dst),
            Some(u) => {
                // dist draws over the chain's output in token-id order, as on the dense row
                if cur.is_empty() {
                    refuse!("llama_cpp_chain_dist: row {b} has no finite logit to select");
                }
                cur.data.sort_unstable_by_key(|c| c.id);
                cur.sorted = false;
                Dist { u: u[b] }.apply(&mut cur);
                ids.push(cur.selected_id().expect("a non-empty row selects") as i64);
            }
        }
    }
    Ok(if then_dist { Array::i64(vec![x.batch], ids) } else { Array::f32(x.dims(), out) })
}
