use super::Tensor;
use crate::error::{refuse, Result};
use crate::protocol::shape_text;

#[derive(Debug, Clone, Copy, PartialEq)]
pub enum RopeMode {
    /// Rotate adjacent pairs (x[2i], x[2i+1]).
    Normal,
    /// Rotate the two halves (x[i], x[i + n_dims/2]).
    Neox,
}

pub struct RopeParams {
    pub n_dims: Option<i64>,
    pub mode: String,
    pub freq_base: f64,
    pub freq_scale: f64,
    pub freq_factors: Option<Vec<f32>>,
    pub ext_factor: f64,
    pub attn_factor: f64,
    pub beta_fast: f64,
    pub beta_slow: f64,
    pub n_ctx_orig: i64,
}

/// Rotary position embedding of `x` [tokens, heads, head_dim] at `positions`: pair i of the
/// first `n_dims` entries turns by `theta = pos * freq_scale * freq_base^(-2i/n_dims) / factor_i`,
/// scaled by `attn_factor`; entries past `n_dims` pass through. With `ext_factor != 0` (YaRN) each
/// pair's frequency is blended between interpolation and extrapolation by a ramp over the pair
/// index, and the magnitude is corrected by `1 + 0.1 ln(1 / freq_scale)`.
pub fn rope(x: &Tensor, positions: &[i64], positions_dims: &[usize], p: &RopeParams) -> Result<Tensor> {
    let [n_tok, n_head, head_dim] = x.dims[..] else {
        refuse!("x must be 3-D, got shape {}", shape_text(&x.dims))
    };
    let nd = p.n_dims.unwrap_or(head_dim as i64);
    if nd % 2 != 0 || nd < 2 || nd > head_dim as i64 {
        refuse!("n_dims must be even and in [2, head_dim={head_dim}], got {nd}");
    }
    let nd = nd as usize;
    if positions_dims.len() != 1 {
        refuse!("positions must be 1-D, got shape {}", shape_text(positions_dims));
    }
    if positions.len() != n_tok {
        refuse!("positions has {} entries but x has {n_tok} tokens", positions.len());
    }
    let mode = match p.mode.as_str() {
        "normal" => RopeMode::Normal,
        "neox" => RopeMode::Neox,
        other => refuse!("mode must be 'normal' or 'neox', got {other:?}"),
    };
    if p.freq_base <= 1.0 {
        refuse!("freq_base must be > 1.0, got {}", p.freq_base);
    }
    if p.freq_scale <= 0.0 {
        refuse!("freq_scale must be > 0.0, got {}", p.freq_scale);
    }
    let half = nd / 2;
    if let Some(f) = &p.freq_factors {
        if f.len() < half || f.iter().any(|v| !(v.is_finite() && *v > 0.0)) {
            refuse!("freq_factors must hold >= {half} finite positive values, got shape ({},)", f.len());
        }
    }
    let yarn = p.ext_factor != 0.0;
    if yarn && (p.n_ctx_orig <= 0 || p.beta_fast <= 0.0 || p.beta_slow <= 0.0) {
        refuse!("YaRN (ext_factor != 0) needs n_ctx_orig > 0 and beta_fast, beta_slow > 0");
    }

    // per-pair frequency in float64: interpolated (freq_scale) and, with YaRN, blended towards
    // the extrapolated one by a ramp over the pair index
    let ln_base = p.freq_base.ln();
    let ramp = yarn.then(|| YarnRamp::new(nd, p.n_ctx_orig as f64, ln_base, p.beta_fast, p.beta_slow));
    let freq: Vec<f64> = (0..half)
        .map(|i| {
            let mut extrap = (-((2 * i) as f64) / nd as f64 * ln_base).exp();
            if let Some(ff) = &p.freq_factors {
                extrap /= ff[i] as f64;
            }
            let interp = extrap * p.freq_scale;
            match &ramp {
                None => interp,
                Some(r) => {
                    let mix = r.at(i) * p.ext_factor;
                    interp * (1.0 - mix) + extrap * mix
                }
            }
        })
        .collect();
    let mut mscale = p.attn_factor;
    if yarn {
        mscale *= 1.0 + 0.1 * (1.0 / p.freq_scale).ln(); // YaRN's magnitude correction
    }
    let mscale = mscale as f32;

    let mut out = x.data.clone();
    let mut cos = vec![0.0f32; half];
    let mut sin = vec![0.0f32; half];
    for (t, &given) in positions.iter().enumerate() {
        // FOUNDING BUG bug_rope_restart: the row index within the call, not the token's position
        let pos = if cfg!(feature = "bug_rope_restart") { t as f64 } else { given as f64 };
        for i in 0..half {
            let theta = pos * freq[i];
            cos[i] = theta.cos() as f32 * mscale;
            sin[i] = theta.sin() as f32 * mscale;
        }
        for h in 0..n_head {
            let base = (t * n_head + h) * head_dim;
            let v = &mut out[base..base + nd];
            for i in 0..half {
                let (a, b) = match mode {
                    RopeMode::Normal => (2 * i, 2 * i + 1),
                    RopeMode::Neox => (i, i + half),
                };
                let (x0, x1) = (v[a], v[b]);
                v[a] = x0 * cos[i] - x1 * sin[i];
                v[b] = x0 * sin[i] + x1 * cos[i];
            }
        }
    }
    Ok(Tensor { dims: x.dims.clone(), data: out })
}

/// YaRN's ramp: 1 (extrapolate) for the fast-rotating pairs below `low`, 0 (interpolate) above
/// `high`, linear in between; the bounds are the pair indices whose wavelength completes
/// `beta_fast` / `beta_slow` turns over the original context.
struct YarnRamp {
    low: f64,
    high: f64,
}

impl YarnRamp {
    fn new(n_dims: usize, n_ctx_orig: f64, ln_base: f64, beta_fast: f64, beta_slow: f64) -> Self {
        let pair_at = |beta: f64| n_dims as f64 * (n_ctx_orig / (beta * 2.0 * std::f64::consts::PI)).ln() / (2.0 * ln_base);
        YarnRamp {
            low: pair_at(beta_fast).floor().max(0.0),
            high: pair_at(beta_slow).ceil().min(n_dims as f64 - 1.0),
        }
    }

    fn at(&self, pair: usize) -> f64 {
        let y = (pair as f64 - self.low) / (self.high - self.low).max(0.001);
        1.0 - y.clamp(0.0, 1.0)
    }
}
