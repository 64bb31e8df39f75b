//! The sampler functions of the judged API: validated arguments, one sampler per row.

use super::rows::{filter, require_candidates, select, PenaltyArgs};
use crate::args::Args;
use crate::candidates::Candidates;
use crate::error::{refuse, Result};
use crate::protocol::{Array, Data};
use crate::samplers::{Dist, Greedy, LogitBias, MinP, Sampler, Softmax, Temp, TopK, TopP, Typical};

pub fn softmax(args: &Args) -> Result<Array> {
    let x = args.logits("logits")?;
    let mut out = vec![0.0f32; x.data.len()];
    for (row, dst) in x.rows().zip(out.chunks_exact_mut(x.vocab)) {
        let mut cur = Candidates::from_logits(row);
        Softmax.apply(&mut cur);
        cur.write_probs(dst);
    }
    Ok(Array::f32(x.dims(), out))
}

pub fn greedy(args: &Args) -> Result<Array> {
    let x = args.logits("logits")?;
    require_candidates(&x, "greedy")?;
    select(&x, |_| Greedy)
}

pub fn dist(args: &Args) -> Result<Array> {
    let x = args.logits("logits")?;
    require_candidates(&x, "dist")?;
    let u = args.row_uniform("u", x.batch)?;
    select(&x, |b| Dist { u: u[b] })
}

pub fn temp(args: &Args) -> Result<Array> {
    let x = args.logits("logits")?;
    let t = args.row_f32("t", x.batch)?;
    Ok(filter(&x, |b| Temp { t: t[b] }))
}

pub fn top_k(args: &Args) -> Result<Array> {
    let x = args.logits("logits")?;
    let k = args.row_int("k", x.batch, None)?;
    Ok(filter(&x, |b| TopK { k: k[b] }))
}

pub fn top_p(args: &Args) -> Result<Array> {
    let x = args.logits("logits")?;
    let p = args.row_f32("p", x.batch)?;
    let min_keep = args.row_count("min_keep", x.batch, 0)?;
    Ok(filter(&x, |b| TopP { p: p[b], min_keep: min_keep[b], fresh_softmax: true }))
}

pub fn min_p(args: &Args) -> Result<Array> {
    let x = args.logits("logits")?;
    let p = args.row_f32("p", x.batch)?;
    let min_keep = args.row_count("min_keep", x.batch, 0)?;
    Ok(filter(&x, |b| MinP { p: p[b], min_keep: min_keep[b] }))
}

pub fn typical(args: &Args) -> Result<Array> {
    let x = args.logits("logits")?;
    let p = args.row_f32("p", x.batch)?;
    let min_keep = args.row_count("min_keep", x.batch, 0)?;
    Ok(filter(&x, |b| Typical { p: p[b], min_keep: min_keep[b] }))
}

pub fn penalties(args: &Args) -> Result<Array> {
    let x = args.logits("logits")?;
    let pa = PenaltyArgs::read(args, &x)?;
    Ok(filter(&x, |b| pa.sampler(b)))
}

pub fn logit_bias(args: &Args) -> Result<Array> {
    let x = args.logits("logits")?;
    let a = args.require("bias")?;
    let bias: Vec<f32> = match &a.data {
        Data::F32(v) => v.clone(),
        Data::F64(v) => v.iter().map(|&b| b as f32).collect(),
        Data::I64(v) => v.iter().map(|&b| b as f32).collect(),
        Data::I32(v) => v.iter().map(|&b| b as f32).collect(),
        _ => refuse!("bias must be numeric, got dtype {}", a.dtype()),
    };
    let per_row = match a.dims[..] {
        [v] if v == x.vocab => false,
        [b, v] if b == x.batch && v == x.vocab => true,
        _ => refuse!("bias has shape {} but must be [{}] or [{}, {}]", a.shape_text(), x.vocab, x.batch, x.vocab),
    };
    let bad: Vec<usize> = bias.chunks(x.vocab).enumerate()
        .filter(|(_, r)| r.iter().any(|b| b.is_nan() || *b == f32::INFINITY)).map(|(i, _)| i).collect();
    if !bad.is_empty() {
        refuse!("bias contains NaN or +inf (rows {bad:?} of the bias)");
    }
    let row_bias = |b: usize| if per_row { &bias[b * x.vocab..(b + 1) * x.vocab] } else { &bias[..] };
    Ok(filter(&x, |b| LogitBias { bias: row_bias(b) }))
}
