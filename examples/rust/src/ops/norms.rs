use super::Tensor;
use crate::error::{refuse, Result};
use crate::protocol::shape_text;

/// RMS norm over the last axis: `x / sqrt(mean(x^2) + eps) * w`, with `w = weight` (plus 1 with
/// `unit_offset`; 1, or 2 with `unit_offset`, when no weight is given). The mean of squares is
/// accumulated in float64, so rows near the float32 limit neither overflow nor lose eps. A row
/// holding NaN or inf is NaN in full; a zero row is 0 for eps > 0 and NaN for eps == 0.
pub fn rms_norm(x: &Tensor, weight: Option<&Tensor>, eps: f64, unit_offset: bool) -> Result<Tensor> {
    let n = match x.dims.last() {
        Some(&n) if n > 0 => n,
        _ => refuse!("x must have a non-empty last axis, got shape {}", shape_text(&x.dims)),
    };
    if eps < 0.0 {
        refuse!("eps must be >= 0.0, got {eps}");
    }
    if let Some(w) = weight {
        if w.dims != [n] {
            refuse!("weight must have shape ({n},) to match the last axis of x, got {}", shape_text(&w.dims));
        }
    }
    let gain = |j: usize| -> f64 {
        let w = weight.map_or(1.0, |w| w.data[j] as f64);
        if unit_offset { w + 1.0 } else { w }
    };
    let mut out = Vec::with_capacity(x.data.len());
    for row in x.data.chunks_exact(n) {
        if row.iter().any(|v| !v.is_finite()) {
            out.extend(std::iter::repeat_n(f32::NAN, n));
            continue;
        }
        let mean_sq = row.iter().map(|&v| (v as f64) * (v as f64)).sum::<f64>() / n as f64;
        let denom = (mean_sq + eps).sqrt();
        out.extend(row.iter().enumerate().map(|(j, &v)| (v as f64 / denom * gain(j)) as f32));
    }
    Ok(Tensor { dims: x.dims.clone(), data: out })
}
