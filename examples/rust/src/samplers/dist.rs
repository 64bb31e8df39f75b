use super::Sampler;
use crate::candidates::Candidates;

/// Inverse CDF over the current order with a supplied uniform `u` (llama.cpp's single-pass
/// dist): weights `exp(l - max)` in float32, their sum S, the target `S * u` and the running sum
/// in float64; the first candidate whose running sum reaches the target. A weight that
/// underflowed to 0 is never picked.
pub struct Dist {
    pub u: f64,
}

impl Sampler for Dist {
    fn apply(&self, cur: &mut Candidates) {
        cur.selected = None;
        if cur.is_empty() {
            return;
        }
        let max = cur.max_logit();
        let mut sum = 0.0f64;
        for c in cur.data.iter_mut() {
            c.p = (c.logit - max).exp();
            sum += c.p as f64;
        }
        let target = sum * self.u;
        let mut run = 0.0f64;
        let mut last_positive = None;
        for (i, c) in cur.data.iter().enumerate() {
            if c.p > 0.0 {
                run += c.p as f64;
                last_positive = Some(i);
                if run >= target {
                    cur.selected = Some(i);
                    break;
                }
            }
        }
        if cur.selected.is_none() {
            cur.selected = last_positive; // never reached through rounding: the last with weight
        }
        for c in cur.data.iter_mut() {
            c.p = (c.p as f64 / sum) as f32;
        }
    }
}
