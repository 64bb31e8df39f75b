//! Samplers over candidate arrays, each as llama.cpp's CPU sampler of the same name runs it.
//! A sampler whose parameters make it a no-op returns at once and touches nothing.

mod dist;
mod greedy;
mod logit_bias;
mod min_p;
mod penalties;
mod softmax;
mod temp;
mod top_k;
mod top_p;
mod typical;

pub use dist::Dist;
pub use greedy::Greedy;
pub use logit_bias::LogitBias;
pub use min_p::MinP;
pub use penalties::Penalties;
pub use softmax::Softmax;
pub use temp::Temp;
pub use top_k::TopK;
pub use top_p::TopP;
pub use typical::Typical;

use crate::candidates::Candidates;

pub trait Sampler {
    /// Filter, reorder or rescale the candidates; a selector sets `cur.selected`.
    fn apply(&self, cur: &mut Candidates);
}

#[cfg(test)]
mod tests {
    use super::*;

    const NEG: f32 = f32::NEG_INFINITY;

    fn run(row: &[f32], s: impl Sampler) -> Vec<f32> {
        let mut cur = Candidates::from_logits(row);
        s.apply(&mut cur);
        let mut out = vec![0.0; row.len()];
        cur.write_logits(&mut out);
        out
    }

    fn pick(row: &[f32], s: impl Sampler) -> Option<u32> {
        let mut cur = Candidates::from_logits(row);
        s.apply(&mut cur);
        cur.selected_id()
    }

    #[test]
    fn top_k_keeps_lower_ids_among_ties() {
        assert_eq!(run(&[1.0, 3.0, 2.0, 3.0, 2.0], TopK { k: 3 }), [NEG, 3.0, 2.0, 3.0, NEG]);
        let row = [0.5, -0.0, 0.0, NEG];
        assert_eq!(run(&row, TopK { k: 0 }).iter().map(|x| x.to_bits()).collect::<Vec<_>>(),
                   row.iter().map(|x| x.to_bits()).collect::<Vec<_>>());
    }

    #[test]
    fn top_p_keeps_the_crossing_token_and_min_keep() {
        let row = [(0.5f32).ln(), (0.3f32).ln(), (0.2f32).ln()];
        assert_eq!(run(&row, TopP { p: 0.6, min_keep: 0, fresh_softmax: true }), [row[0], row[1], NEG]);
        assert_eq!(run(&row, TopP { p: 0.0, min_keep: 0, fresh_softmax: true }), [row[0], NEG, NEG]);
        assert_eq!(run(&row, TopP { p: 0.0, min_keep: 3, fresh_softmax: true }), row);
    }

    #[test]
    fn min_p_threshold_and_fallback() {
        let row = [0.0, (0.5f32).ln(), (0.05f32).ln(), NEG];
        assert_eq!(run(&row, MinP { p: 0.1, min_keep: 0 }), [row[0], row[1], NEG, NEG]);
        assert_eq!(run(&row, MinP { p: 2.0, min_keep: 2 }), [row[0], row[1], NEG, NEG]);
        assert_eq!(run(&row, MinP { p: 0.0, min_keep: 0 }), row);
    }

    #[test]
    fn temp_zero_keeps_the_first_maximum() {
        assert_eq!(run(&[1.0, 4.0, 4.0, NEG], Temp { t: 0.0 }), [NEG, 4.0, NEG, NEG]);
        assert_eq!(run(&[1.0, -4.0], Temp { t: 0.5 }), [2.0, -8.0]);
    }

    #[test]
    fn selectors_walk_token_order() {
        assert_eq!(pick(&[1.0, 4.0, 4.0], Greedy), Some(1));
        let row = [0.0f32; 4]; // four equal weights: u in (0.25, 0.5] picks token 1
        assert_eq!(pick(&row, Dist { u: 0.0 }), Some(0));
        assert_eq!(pick(&row, Dist { u: 0.3 }), Some(1));
        assert_eq!(pick(&row, Dist { u: 1.0 }), Some(3));
        assert_eq!(pick(&[NEG, 0.0, -200.0], Dist { u: 1.0 }), Some(1)); // exp underflow: never picked
    }

    #[test]
    fn penalties_window_and_signs() {
        let p = Penalties::new(&[2, -1, 0, 2, 1], 3, 2.0, 0.5, 0.25);
        // window = the last 3 real tokens: 0, 2, 1 (each once)
        assert_eq!(run(&[4.0, -4.0, 0.0, 1.0], p), [1.25, -8.75, -0.75, 1.0]);
    }
}
