//! `ops.softmax`, `ops.rms_norm`, `ops.rope`: argument decoding around the engine's ops.

use crate::args::Args;
use crate::error::Result;
use crate::ops::{self, RopeParams, Tensor};
use crate::protocol::Array;

fn tensor(args: &Args, name: &str) -> Result<Tensor> {
    let (dims, data) = args.tensor(name)?;
    Ok(Tensor { dims, data })
}

fn opt_tensor(args: &Args, name: &str) -> Result<Option<Tensor>> {
    Ok(args.opt_tensor(name)?.map(|(dims, data)| Tensor { dims, data }))
}

pub fn softmax(args: &Args) -> Result<Array> {
    let x = tensor(args, "x")?;
    let axis = args.opt_int("axis")?.unwrap_or(-1);
    let scale = args.scalar("scale", 1.0)?;
    let mask = opt_tensor(args, "mask")?;
    let y = ops::softmax(&x, axis, scale, mask.as_ref())?;
    Ok(Array::f32(y.dims, y.data))
}

pub fn rms_norm(args: &Args) -> Result<Array> {
    let x = tensor(args, "x")?;
    let weight = opt_tensor(args, "weight")?;
    let eps = args.scalar("eps", 1e-6)?;
    let unit_offset = args.flag("unit_offset", false)?;
    let y = ops::rms_norm(&x, weight.as_ref(), eps, unit_offset)?;
    Ok(Array::f32(y.dims, y.data))
}

pub fn rope(args: &Args) -> Result<Array> {
    let x = tensor(args, "x")?;
    let (pos_dims, positions) = args.int_tensor("positions")?;
    let params = RopeParams {
        n_dims: args.opt_int("n_dims")?,
        mode: args.text("mode", "normal")?,
        freq_base: args.scalar("freq_base", 10000.0)?,
        freq_scale: args.scalar("freq_scale", 1.0)?,
        freq_factors: opt_tensor(args, "freq_factors")?.map(|t| t.data),
        ext_factor: args.scalar("ext_factor", 0.0)?,
        attn_factor: args.scalar("attn_factor", 1.0)?,
        beta_fast: args.scalar("beta_fast", 32.0)?,
        beta_slow: args.scalar("beta_slow", 1.0)?,
        n_ctx_orig: args.opt_int("n_ctx_orig")?.unwrap_or(0),
    };
    let y = ops::rope(&x, &positions, &pos_dims, &params)?;
    Ok(Array::f32(y.dims, y.data))
}
