use super::Sampler;
use crate::candidates::Candidates;

/// Keep the first `k` candidates of the order (ties at the boundary: lower ids). `k <= 0` is a
/// no-op. The result is sorted; p is not recomputed.
pub struct TopK {
    pub k: i64,
}

impl Sampler for TopK {
    fn apply(&self, cur: &mut Candidates) {
        if self.k <= 0 || cur.is_empty() {
            return;
        }
        let k = (self.k as u64).min(cur.len() as u64) as usize;
        cur.keep_top(k);
    }
}
