use std::cmp::Ordering;

use super::Sampler;
use crate::candidates::{by_logit_desc, Candidates};

/// Locally typical sampling: candidates ordered by ascending `|-ln p_i - H|` (ties: descending
/// logit, then lower id); keep the shortest prefix whose float32 cumulative probability exceeds
/// `p` (strictly) and holds at least `max(min_keep, 1)`; all if never. `p >= 1` is a no-op.
pub struct Typical {
    pub p: f32,
    pub min_keep: usize,
}

impl Sampler for Typical {
    fn apply(&self, cur: &mut Candidates) {
        if self.p >= 1.0 || cur.is_empty() {
            return;
        }
        cur.sort();
        cur.softmax();
        // entropy; a probability that underflowed to 0 contributes 0 (lim p ln p)
        let entropy: f32 = -cur.data.iter().filter(|c| c.p > 0.0).map(|c| c.p * c.p.ln()).sum::<f32>();
        let score = |p: f32| if p > 0.0 { (-p.ln() - entropy).abs() } else { f32::INFINITY };
        let mut order: Vec<(f32, usize)> = cur.data.iter().enumerate().map(|(i, c)| (score(c.p), i)).collect();
        order.sort_by(|a, b| {
            a.0.partial_cmp(&b.0).unwrap_or(Ordering::Equal).then_with(|| by_logit_desc(&cur.data[a.1], &cur.data[b.1]))
        });
        let need = self.min_keep.max(1);
        let mut keep = order.len();
        let mut cum = 0.0f32;
        for (i, &(_, j)) in order.iter().enumerate() {
            cum += cur.data[j].p;
            if cum > self.p && i + 1 >= need {
                keep = i + 1;
                break;
            }
        }
        cur.data = order[..keep].iter().map(|&(_, j)| cur.data[j]).collect();
        cur.sorted = false;
    }
}
