use super::Sampler;
use crate::candidates::Candidates;

/// Sort the candidates and give each its probability (llama.cpp's historical softmax sampler).
pub struct Softmax;

impl Sampler for Softmax {
    fn apply(&self, cur: &mut Candidates) {
        cur.sort();
        cur.softmax();
    }
}
