use std::collections::HashMap;

use super::Sampler;
use crate::candidates::Candidates;

/// Repetition, frequency and presence penalties over a window of recent tokens: for every
/// candidate seen c > 0 times, `l = l <= 0 ? l * repeat : l / repeat`, then
/// `l -= c * freq + present`. Disabled (`counts` empty, or neutral factors) it is a no-op.
pub struct Penalties {
    pub counts: HashMap<u32, u32>,
    pub repeat: f32,
    pub freq: f32,
    pub present: f32,
}

impl Penalties {
    /// Counts of the last `last_n` real tokens of `history` (chronological, -1 = padding).
    pub fn new(history: &[i64], last_n: i64, repeat: f32, freq: f32, present: f32) -> Self {
        let mut counts = HashMap::new();
        let neutral = repeat == 1.0 && freq == 0.0 && present == 0.0;
        if last_n > 0 && !neutral {
            for &id in history.iter().rev().filter(|&&id| id >= 0).take(last_n as usize) {
                *counts.entry(id as u32).or_insert(0) += 1;
            }
        }
        Penalties { counts, repeat, freq, present }
    }
}

impl Sampler for Penalties {
    fn apply(&self, cur: &mut Candidates) {
        if self.counts.is_empty() {
            return;
        }
        for c in cur.data.iter_mut() {
            if let Some(&n) = self.counts.get(&c.id) {
                c.logit = if c.logit <= 0.0 { c.logit * self.repeat } else { c.logit / self.repeat };
                c.logit -= n as f32 * self.freq + self.present;
            }
        }
        cur.sorted = false;
        cur.data.retain(|c| c.logit > f32::NEG_INFINITY);
    }
}
