use super::Sampler;
use crate::candidates::Candidates;

/// Keep `l >= max + ln p` (float32, inclusive), in the current order. If fewer than
/// `max(min_keep, 1)` survive, keep instead that many of the first in sorted order.
/// `p <= 0` is a no-op; p is not computed.
pub struct MinP {
    pub p: f32,
    pub min_keep: usize,
}

impl Sampler for MinP {
    fn apply(&self, cur: &mut Candidates) {
        if self.p <= 0.0 || cur.is_empty() {
            return;
        }
        let ln_p = self.p.ln();
        if !cur.sorted {
            let threshold = cur.max_logit() + ln_p;
            let kept: Vec<_> = cur.data.iter().copied().filter(|c| c.logit >= threshold).collect();
            if !kept.is_empty() && kept.len() >= self.min_keep {
                cur.data = kept;
                return;
            }
        }
        cur.sort();
        let threshold = cur.data[0].logit + ln_p;
        let mut keep = cur.len();
        for i in 1..cur.len() {
            if cur.data[i].logit < threshold && i >= self.min_keep {
                keep = i;
                break;
            }
        }
        cur.data.truncate(keep);
    }
}
