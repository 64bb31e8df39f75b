use super::Sampler;
use crate::candidates::Candidates;

/// Nucleus sampling: in order, the shortest prefix whose float32 cumulative probability reaches
/// `p` (the crossing token is kept) and holds at least `min_keep` tokens; all candidates if the
/// sum never gets there. `p >= 1` is a no-op.
pub struct TopP {
    pub p: f32,
    pub min_keep: usize,
    /// Recompute p over the current candidates first (llama.cpp always does; a chain that
    /// reuses stale probabilities is a bug).
    pub fresh_softmax: bool,
}

/// Unsorted arrays larger than this are first searched within a partially sorted prefix.
const PARTIAL_SORT_ABOVE: usize = 1024;
const PARTIAL_PREFIX: usize = 256;

impl Sampler for TopP {
    fn apply(&self, cur: &mut Candidates) {
        if self.p >= 1.0 || cur.is_empty() {
            return;
        }
        if self.fresh_softmax {
            cur.softmax();
        }
        let n = cur.len();
        let mut ordered = if cur.sorted {
            n
        } else if n > PARTIAL_SORT_ABOVE {
            cur.sort_prefix(PARTIAL_PREFIX);
            PARTIAL_PREFIX
        } else {
            cur.sort();
            n
        };
        let mut cum = 0.0f32;
        let mut keep = n;
        for i in 0..n {
            if i == ordered {
                cur.sort(); // the prefix did not reach p: order the rest as well
                ordered = n;
            }
            // FOUNDING BUG bug_top_p_on_logits: accumulates logits, not probabilities
            cum += if cfg!(feature = "bug_top_p_on_logits") { cur.data[i].logit } else { cur.data[i].p };
            if cum >= self.p && i + 1 >= self.min_keep {
                keep = i + 1;
                break;
            }
        }
        if keep < n {
            cur.data.truncate(keep);
        }
        cur.sorted = true;
    }
}
