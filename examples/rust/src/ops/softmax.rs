use super::Tensor;
use crate::error::{refuse, Result};
use crate::protocol::shape_text;

/// Softmax of `scale * x + mask` along `axis`. A lane holding NaN or +inf, or no finite entry,
/// has no distribution and comes out NaN; `-inf` entries get exactly 0.
pub fn softmax(x: &Tensor, axis: i64, scale: f64, mask: Option<&Tensor>) -> Result<Tensor> {
    let nd = x.dims.len();
    if nd == 0 {
        refuse!("x must have at least one axis");
    }
    if axis < -(nd as i64) || axis >= nd as i64 {
        refuse!("axis {axis} is out of range for x of shape {}", shape_text(&x.dims));
    }
    let axis = axis.rem_euclid(nd as i64) as usize;
    if x.dims[axis] == 0 {
        refuse!("softmax over an empty axis (x has shape {})", shape_text(&x.dims));
    }
    if scale <= 0.0 {
        refuse!("scale must be > 0.0, got {scale}");
    }
    let mut z = x.data.clone();
    if scale != 1.0 {
        let s = scale as f32;
        z.iter_mut().for_each(|v| *v *= s);
    }
    if let Some(m) = mask {
        if m.data.iter().any(|v| v.is_nan() || *v == f32::INFINITY) {
            refuse!("mask entries must be finite or -inf (found NaN or +inf)");
        }
        add_broadcast(&mut z, &x.dims, m)?;
    }
    let n = x.dims[axis];
    let inner: usize = x.dims[axis + 1..].iter().product();
    let outer: usize = x.dims[..axis].iter().product();
    let mut out = vec![0.0f32; z.len()];
    let mut e = vec![0.0f32; n];
    for o in 0..outer {
        for i in 0..inner {
            let at = |j: usize| (o * n + j) * inner + i;
            let mut top = f32::NEG_INFINITY;
            let mut nan = false;
            for j in 0..n {
                let v = z[at(j)];
                nan |= v.is_nan();
                top = top.max(v);
            }
            if nan || !top.is_finite() {
                (0..n).for_each(|j| out[at(j)] = f32::NAN);
                continue;
            }
            let mut sum = 0.0f64;
            for j in 0..n {
                e[j] = (z[at(j)] - top).exp();
                sum += e[j] as f64;
            }
            for j in 0..n {
                out[at(j)] = (e[j] as f64 / sum) as f32;
            }
        }
    }
    Ok(Tensor { dims: x.dims.clone(), data: out })
}

/// `z += mask` with NumPy broadcasting of `mask` to `dims` (the mask may not enlarge `z`).
fn add_broadcast(z: &mut [f32], dims: &[usize], mask: &Tensor) -> Result<()> {
    let nd = dims.len();
    let md = mask.dims.len();
    let fits = md <= nd && mask.dims.iter().rev().zip(dims.iter().rev()).all(|(&a, &b)| a == 1 || a == b);
    if !fits {
        refuse!("mask of shape {} does not broadcast to x's shape {}", shape_text(&mask.dims), shape_text(dims));
    }
    // stride of each x axis in the mask (0 where the mask broadcasts)
    let mut strides = vec![0usize; nd];
    let mut s = 1usize;
    for k in (0..md).rev() {
        let axis = nd - md + k;
        strides[axis] = if mask.dims[k] == 1 { 0 } else { s };
        s *= mask.dims[k];
    }
    let mut index = vec![0usize; nd];
    for v in z.iter_mut() {
        let at: usize = index.iter().zip(&strides).map(|(i, s)| i * s).sum();
        *v += mask.data[at];
        for axis in (0..nd).rev() {
            index[axis] += 1;
            if index[axis] < dims[axis] {
                break;
            }
            index[axis] = 0;
        }
    }
    Ok(())
}
