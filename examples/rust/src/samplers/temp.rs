use super::Sampler;
use crate::candidates::Candidates;

/// `l / t`; `t <= 0` keeps only the first maximal logit (every other becomes `-inf`, nothing is
/// reordered). `t == 1` is a no-op.
pub struct Temp {
    pub t: f32,
}

impl Sampler for Temp {
    fn apply(&self, cur: &mut Candidates) {
        if self.t == 1.0 || cur.is_empty() {
            return;
        }
        if self.t > 0.0 {
            for c in cur.data.iter_mut() {
                c.logit /= self.t;
            }
            return;
        }
        let mut best = 0;
        for i in 1..cur.data.len() {
            if cur.data[i].logit > cur.data[best].logit {
                cur.data[best].logit = f32::NEG_INFINITY;
                best = i;
            } else {
                cur.data[i].logit = f32::NEG_INFINITY;
            }
        }
        // the masked tokens are no longer candidates
        cur.data.retain(|c| c.logit > f32::NEG_INFINITY);
    }
}
