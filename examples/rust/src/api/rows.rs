//! Plumbing between logitcheck's dense rows and the engine's candidate arrays: run a sampler
//! per row and write the row back, or collect the token each row selects; token histories.

use crate::args::{Args, Rows};
use crate::candidates::Candidates;
use crate::error::{refuse, Result};
use crate::protocol::{Array, Data};
use crate::samplers::{Penalties, Sampler};

/// Run `sampler_for(b)` over every row's candidates and write the dense logits back.
pub fn filter<S: Sampler>(x: &Rows, mut sampler_for: impl FnMut(usize) -> S) -> Array {
    let mut out = vec![0.0f32; x.data.len()];
    for (b, (row, dst)) in x.rows().zip(out.chunks_exact_mut(x.vocab)).enumerate() {
        let mut cur = Candidates::from_logits(row);
        sampler_for(b).apply(&mut cur);
        cur.write_logits(dst);
    }
    Array::f32(x.dims(), out)
}

/// Selectors need at least one finite logit per row.
pub fn require_candidates(x: &Rows, function: &str) -> Result<()> {
    let empty: Vec<usize> = (0..x.batch).filter(|&b| x.row(b).iter().all(|&l| l == f32::NEG_INFINITY)).collect();
    if !empty.is_empty() {
        refuse!("{function}: rows {empty:?} have no finite logit to select");
    }
    Ok(())
}

/// Run the selector `sampler_for(b)` over every row's candidates; the token ids it picks.
pub fn select<S: Sampler>(x: &Rows, mut sampler_for: impl FnMut(usize) -> S) -> Result<Array> {
    let mut ids = Vec::with_capacity(x.batch);
    for b in 0..x.batch {
        let mut cur = Candidates::from_logits(x.row(b));
        sampler_for(b).apply(&mut cur);
        match cur.selected_id() {
            Some(id) => ids.push(id as i64),
            None => refuse!("row {b} has no candidate to select"),
        }
    }
    Ok(Array::i64(vec![x.batch], ids))
}

/// Token-id history `[batch, H]` or `[H]` (shared by every row); -1 is padding.
fn history(args: &Args, batch: usize, vocab: usize) -> Result<Vec<Vec<i64>>> {
    let a = args.require("history")?;
    let (dims, ids) = match &a.data {
        Data::I64(_) | Data::I32(_) => args.int_tensor("history")?,
        Data::F32(v) if v.is_empty() => (a.dims.clone(), vec![]),
        Data::F64(v) if v.is_empty() => (a.dims.clone(), vec![]),
        _ => refuse!("history must hold integer token ids, got dtype {}", a.dtype()),
    };
    let rows: Vec<Vec<i64>> = match dims[..] {
        [h] => vec![ids[..h].to_vec(); batch],
        [bb, h] if bb == batch => (0..batch).map(|b| ids[b * h..(b + 1) * h].to_vec()).collect(),
        _ => refuse!("history has shape {} but must be [batch={batch}, H]", args.shape_of("history")),
    };
    let bad: Vec<usize> =
        (0..batch).filter(|&b| rows[b].iter().any(|&id| id < -1 || id >= vocab as i64)).collect();
    if !bad.is_empty() {
        refuse!("history rows {bad:?} hold ids outside [-1, {vocab}) (-1 is padding)");
    }
    Ok(rows)
}

pub struct PenaltyArgs {
    history: Vec<Vec<i64>>,
    last_n: Vec<i64>,
    repeat: Vec<f32>,
    freq: Vec<f32>,
    present: Vec<f32>,
}

impl PenaltyArgs {
    pub fn read(args: &Args, x: &Rows) -> Result<Self> {
        let history = history(args, x.batch, x.vocab)?;
        let last_n = args.row_int("last_n", x.batch, None)?;
        let repeat = args.row_f32("repeat", x.batch)?;
        let freq = args.row_f32("freq", x.batch)?;
        let present = args.row_f32("present", x.batch)?;
        if repeat.iter().any(|&r| r <= 0.0) {
            refuse!("parameter repeat must be > 0, got {repeat:?}");
        }
        Ok(PenaltyArgs { history, last_n, repeat, freq, present })
    }

    pub fn sampler(&self, b: usize) -> Penalties {
        Penalties::new(&self.history[b], self.last_n[b], self.repeat[b], self.freq[b], self.present[b])
    }
}
