use super::Sampler;
use crate::candidates::Candidates;

/// The first maximal logit in the current order (strict `>`, so the earliest of equal maxima).
pub struct Greedy;

impl Sampler for Greedy {
    fn apply(&self, cur: &mut Candidates) {
        let mut best: Option<usize> = None;
        for (i, c) in cur.data.iter().enumerate() {
            if best.is_none_or(|b| c.logit > cur.data[b].logit) {
                best = Some(i);
            }
        }
        cur.selected = best;
    }
}
