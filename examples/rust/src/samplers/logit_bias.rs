use super::Sampler;
use crate::candidates::Candidates;

/// Adds a dense per-token bias; a `-inf` bias removes the token.
pub struct LogitBias<'a> {
    pub bias: &'a [f32],
}

impl Sampler for LogitBias<'_> {
    fn apply(&self, cur: &mut Candidates) {
        for c in cur.data.iter_mut() {
            c.logit += self.bias[c.id as usize];
        }
        cur.sorted = false;
        cur.data.retain(|c| c.logit > f32::NEG_INFINITY);
    }
}
