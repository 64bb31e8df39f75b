//! Transformer ops over float32 tensors (row-major), as a ggml-style CPU backend computes them:
//! float32 values, float64 accumulators for reductions. Scalar parameters arrive finite (the
//! argument layer refuses NaN and inf before an op runs).

mod norms;
mod rope;
mod softmax;

pub use norms::rms_norm;
pub use rope::{rope, RopeParams};
pub use softmax::softmax;

/// A float32 tensor: dims and row-major values.
#[derive(Debug, Clone)]
pub struct Tensor {
    pub dims: Vec<usize>,
    pub data: Vec<f32>,
}
