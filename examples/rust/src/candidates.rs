//! llama.cpp-style candidate arrays: a dense row of logits becomes the list of its finite tokens
//! (`-inf` means "not a candidate"), samplers shrink, reorder and rescale that list, and it is
//! written back as a dense row with `-inf` for every token that is no longer a candidate.

use std::cmp::Ordering;

#[derive(Debug, Clone, Copy)]
pub struct Candidate {
    pub id: u32,
    pub logit: f32,
    pub p: f32,
}

/// The candidates of one row. `sorted` means descending logit, ties by lower id first.
#[derive(Debug, Clone)]
pub struct Candidates {
    pub data: Vec<Candidate>,
    pub sorted: bool,
    /// Index into `data` of the token a selector picked.
    pub selected: Option<usize>,
}

/// Descending logit, then lower id: the one order every sampler means by "first".
/// `partial_cmp` (not `total_cmp`) so that -0.0 and +0.0 tie; candidates are never NaN.
pub fn by_logit_desc(a: &Candidate, b: &Candidate) -> Ordering {
    b.logit.partial_cmp(&a.logit).unwrap_or(Ordering::Equal).then(a.id.cmp(&b.id))
}

impl Candidates {
    /// Every finite logit of `row`, in token-id order (unsorted), p = 0.
    pub fn from_logits(row: &[f32]) -> Self {
        let data = row
            .iter()
            .enumerate()
            .filter(|(_, l)| **l > f32::NEG_INFINITY)
            .map(|(i, &logit)| Candidate { id: i as u32, logit, p: 0.0 })
            .collect();
        Candidates { data, sorted: false, selected: None }
    }

    pub fn len(&self) -> usize {
        self.data.len()
    }

    pub fn is_empty(&self) -> bool {
        self.data.is_empty()
    }

    /// Dense logits: each candidate's logit bit for bit, `-inf` for every other token.
    pub fn write_logits(&self, out: &mut [f32]) {
        out.fill(f32::NEG_INFINITY);
        for c in &self.data {
            out[c.id as usize] = c.logit;
        }
    }

    /// Dense probabilities: each candidate's p, 0 for every other token.
    pub fn write_probs(&self, out: &mut [f32]) {
        out.fill(0.0);
        for c in &self.data {
            out[c.id as usize] = c.p;
        }
    }

    pub fn max_logit(&self) -> f32 {
        if self.sorted {
            return self.data.first().map_or(f32::NEG_INFINITY, |c| c.logit);
        }
        self.data.iter().fold(f32::NEG_INFINITY, |m, c| if c.logit > m { c.logit } else { m })
    }

    /// Sort the whole array (a no-op when it already is).
    pub fn sort(&mut self) {
        if !self.sorted {
            self.data.sort_unstable_by(by_logit_desc);
            self.sorted = true;
        }
    }

    /// Bring the first `n` candidates of the order to the front, in order; the rest follow in
    /// no particular order (`sorted` is set only when that covers the whole array).
    pub fn sort_prefix(&mut self, n: usize) {
        if self.sorted || n == 0 {
            return;
        }
        if n >= self.data.len() {
            return self.sort();
        }
        self.data.select_nth_unstable_by(n - 1, by_logit_desc);
        self.data[..n].sort_unstable_by(by_logit_desc);
    }

    /// Keep the first `n` of the sorted order.
    pub fn keep_top(&mut self, n: usize) {
        self.sort_prefix(n);
        self.data.truncate(n);
        self.sorted = true;
    }

    /// p = exp(l - max) / sum, in float32 with a float32 running sum over the current order
    /// (no sort). Logits are untouched.
    pub fn softmax(&mut self) {
        if self.data.is_empty() {
            return;
        }
        let max = self.max_logit();
        // FOUNDING BUG bug_softmax_top1000: the normaliser only covers the top 1,000 candidates
        // of large rows
        let normalised_over = if cfg!(feature = "bug_softmax_top1000") && self.data.len() > 1000 {
            self.sort();
            1000
        } else {
            self.data.len()
        };
        let mut sum = 0.0f32;
        for (i, c) in self.data.iter_mut().enumerate() {
            c.p = (c.logit - max).exp();
            if i < normalised_over {
                sum += c.p;
            }
        }
        for c in self.data.iter_mut() {
            c.p /= sum;
        }
    }

    pub fn selected_id(&self) -> Option<u32> {
        self.selected.map(|i| self.data[i].id)
    }
}
