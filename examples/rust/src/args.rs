//! The arguments of one call, decoded and validated: logits as `[batch, vocab]` f32 rows,
//! per-row parameters (a scalar or a length-`batch` vector), scalars, strings and flags.
//! Every rule of the judged API's input contract that is not sampler maths lives here.

use crate::error::{refuse, Result};
use crate::protocol::{shape_text, Array, Data};

/// Dense `[batch, vocab]` float32 rows, row-major.
#[derive(Debug, Clone)]
pub struct Rows {
    pub batch: usize,
    pub vocab: usize,
    pub data: Vec<f32>,
}

impl Rows {
    pub fn row(&self, b: usize) -> &[f32] {
        &self.data[b * self.vocab..(b + 1) * self.vocab]
    }

    pub fn rows(&self) -> std::slice::ChunksExact<'_, f32> {
        self.data.chunks_exact(self.vocab)
    }

    pub fn dims(&self) -> Vec<usize> {
        vec![self.batch, self.vocab]
    }
}

pub struct Args {
    items: Vec<(String, Array)>,
}

/// NumPy's name of a wire dtype, for messages that read like the Python reference's.
fn numpy_name(a: &Array) -> &'static str {
    match a.data {
        Data::F32(_) => "float32",
        Data::F64(_) => "float64",
        Data::I64(_) => "int64",
        Data::I32(_) => "int32",
        Data::U8(_) => "bool",
        Data::Str(_) => "str",
    }
}

/// The elements of a numeric (not boolean, not string) array as f64 (integers exactly as long as
/// they fit 2^53, which every legal parameter does).
fn as_f64(a: &Array) -> Option<Vec<f64>> {
    match &a.data {
        Data::F32(v) => Some(v.iter().map(|&x| x as f64).collect()),
        Data::F64(v) => Some(v.clone()),
        Data::I64(v) => Some(v.iter().map(|&x| x as f64).collect()),
        Data::I32(v) => Some(v.iter().map(|&x| x as f64).collect()),
        Data::U8(_) | Data::Str(_) => None,
    }
}

/// Numeric elements rounded to float32 the way NumPy's `astype(float32)` does (integers and
/// doubles round to nearest; a double beyond the float32 range becomes infinite).
fn as_f32(a: &Array) -> Option<Vec<f32>> {
    match &a.data {
        Data::F32(v) => Some(v.clone()),
        Data::F64(v) => Some(v.iter().map(|&x| x as f32).collect()),
        Data::I64(v) => Some(v.iter().map(|&x| x as f32).collect()),
        Data::I32(v) => Some(v.iter().map(|&x| x as f32).collect()),
        Data::U8(_) | Data::Str(_) => None,
    }
}

fn list<T: std::fmt::Debug>(v: &[T]) -> String {
    if v.len() <= 8 {
        format!("{v:?}")
    } else {
        format!("{:?}... ({} values)", &v[..8], v.len())
    }
}

/// A scalar (broadcast) or a vector of exactly `batch` values.
fn per_row<T: Clone>(name: &str, a: &Array, values: Vec<T>, batch: usize) -> Result<Vec<T>> {
    match a.dims.as_slice() {
        [] => Ok(vec![values[0].clone(); batch]),
        [n] if *n == batch => Ok(values),
        _ => refuse!("parameter {name} has shape {} but batch is {batch}", a.shape_text()),
    }
}

impl Args {
    pub fn new(items: Vec<(String, Array)>) -> Self {
        Args { items }
    }

    pub fn get(&self, name: &str) -> Option<&Array> {
        self.items.iter().find(|(n, _)| n == name).map(|(_, a)| a)
    }

    pub fn require(&self, name: &str) -> Result<&Array> {
        match self.get(name) {
            Some(a) => Ok(a),
            None => refuse!("missing argument {name}"),
        }
    }

    /// Logits `[batch, vocab]`, batch and vocab >= 1, as float32; NaN or +inf is refused.
    pub fn logits(&self, name: &str) -> Result<Rows> {
        let a = self.require(name)?;
        let data = match &a.data {
            Data::F32(v) => v.clone(),
            Data::F64(v) => v.iter().map(|&x| x as f32).collect(),
            _ => refuse!("{name} must be float32, float16, bfloat16 or float64, got dtype {}", numpy_name(a)),
        };
        let [batch, vocab] = a.dims[..] else {
            refuse!("{name} must be 2-D [batch, vocab], got shape {}", a.shape_text())
        };
        if batch < 1 || vocab < 1 {
            refuse!("{name} must have batch >= 1 and vocab >= 1, got shape {}", a.shape_text());
        }
        let rows = Rows { batch, vocab, data };
        let bad: Vec<usize> = (0..batch)
            .filter(|&b| rows.row(b).iter().any(|x| x.is_nan() || *x == f32::INFINITY))
            .collect();
        if !bad.is_empty() {
            refuse!("{name} rows {} contain NaN or +inf (after conversion to float32)", list(&bad));
        }
        Ok(rows)
    }

    /// A float32 per-row parameter; it must be finite once rounded to float32.
    pub fn row_f32(&self, name: &str, batch: usize) -> Result<Vec<f32>> {
        let a = self.require(name)?;
        let Some(values) = as_f32(a) else {
            refuse!("parameter {name} must be numeric, got dtype {}", numpy_name(a))
        };
        let values = per_row(name, a, values, batch)?;
        if values.iter().any(|x| !x.is_finite()) {
            refuse!("parameter {name} must be finite (in float32), got {}", list(&values));
        }
        Ok(values)
    }

    /// A float64 uniform per row, in [0, 1].
    pub fn row_uniform(&self, name: &str, batch: usize) -> Result<Vec<f64>> {
        let a = self.require(name)?;
        let Some(values) = as_f64(a) else {
            refuse!("parameter {name} must be numeric, got dtype {}", numpy_name(a))
        };
        let values = per_row(name, a, values, batch)?;
        if values.iter().any(|x| !x.is_finite()) {
            refuse!("parameter {name} must be finite (in float64), got {}", list(&values));
        }
        if values.iter().any(|&x| !(0.0..=1.0).contains(&x)) {
            refuse!("parameter {name} must lie in [0, 1], got {}", list(&values));
        }
        Ok(values)
    }

    /// An integer per-row parameter (a float must be finite and integral); `default` when absent.
    pub fn row_int(&self, name: &str, batch: usize, default: Option<i64>) -> Result<Vec<i64>> {
        let a = match (self.get(name), default) {
            (Some(a), _) => a,
            (None, Some(d)) => return Ok(vec![d; batch]),
            (None, None) => refuse!("missing argument {name}"),
        };
        let values: Vec<i64> = match &a.data {
            Data::I64(v) => v.clone(),
            Data::I32(v) => v.iter().map(|&x| x as i64).collect(),
            Data::F32(_) | Data::F64(_) => {
                let f = as_f64(a).expect("float data");
                if f.iter().any(|x| !x.is_finite() || x.fract() != 0.0) {
                    refuse!("parameter {name} must be a finite integer, got {}", list(&f));
                }
                f.iter().map(|&x| x as i64).collect()
            }
            _ => refuse!("parameter {name} must be numeric, got dtype {}", numpy_name(a)),
        };
        per_row(name, a, values, batch)
    }

    /// A non-negative integer per-row parameter (min_keep).
    pub fn row_count(&self, name: &str, batch: usize, default: i64) -> Result<Vec<usize>> {
        let v = self.row_int(name, batch, Some(default))?;
        if v.iter().any(|&x| x < 0) {
            refuse!("parameter {name} must be >= 0, got {}", list(&v));
        }
        Ok(v.into_iter().map(|x| x as usize).collect())
    }

    /// A finite float scalar; `default` when absent.
    pub fn scalar(&self, name: &str, default: f64) -> Result<f64> {
        let Some(a) = self.get(name) else { return Ok(default) };
        let v = match as_f64(a) {
            Some(v) if a.dims.is_empty() => v[0],
            _ => refuse!("{name} must be a number, got dtype {} shape {}", numpy_name(a), a.shape_text()),
        };
        if !v.is_finite() {
            refuse!("{name} must be finite, got {v}");
        }
        Ok(v)
    }

    /// An integer scalar, `None` when absent (Python's default None).
    pub fn opt_int(&self, name: &str) -> Result<Option<i64>> {
        let Some(a) = self.get(name) else { return Ok(None) };
        match (&a.data, a.dims.len()) {
            (Data::I64(v), 0) => Ok(Some(v[0])),
            (Data::I32(v), 0) => Ok(Some(v[0] as i64)),
            (Data::F64(v), 0) if v[0].is_finite() && v[0].fract() == 0.0 => Ok(Some(v[0] as i64)),
            _ => refuse!("{name} must be an integer, got dtype {} shape {}", numpy_name(a), a.shape_text()),
        }
    }

    pub fn text(&self, name: &str, default: &str) -> Result<String> {
        match self.get(name).map(|a| &a.data) {
            None => Ok(default.to_string()),
            Some(Data::Str(s)) => Ok(s.clone()),
            Some(_) => refuse!("{name} must be a string"),
        }
    }

    pub fn flag(&self, name: &str, default: bool) -> Result<bool> {
        let Some(a) = self.get(name) else { return Ok(default) };
        match (&a.data, a.dims.len()) {
            (Data::U8(v), 0) => Ok(v[0] != 0),
            (Data::I64(v), 0) => Ok(v[0] != 0),
            _ => refuse!("{name} must be a boolean, got dtype {} shape {}", numpy_name(a), a.shape_text()),
        }
    }

    /// A float tensor (float32 or float64 on the wire) as float32 with its dims; integers and
    /// booleans are refused with a message naming `name` and "float".
    pub fn tensor(&self, name: &str) -> Result<(Vec<usize>, Vec<f32>)> {
        let a = self.require(name)?;
        match &a.data {
            Data::F32(_) | Data::F64(_) => Ok((a.dims.clone(), as_f32(a).expect("float data"))),
            _ => refuse!("{name} must be float16, bfloat16 or float32, got dtype {}", numpy_name(a)),
        }
    }

    pub fn opt_tensor(&self, name: &str) -> Result<Option<(Vec<usize>, Vec<f32>)>> {
        if self.get(name).is_none() {
            return Ok(None);
        }
        self.tensor(name).map(Some)
    }

    /// An integer tensor (token ids, positions) with its dims.
    pub fn int_tensor(&self, name: &str) -> Result<(Vec<usize>, Vec<i64>)> {
        let a = self.require(name)?;
        match &a.data {
            Data::I64(v) => Ok((a.dims.clone(), v.clone())),
            Data::I32(v) => Ok((a.dims.clone(), v.iter().map(|&x| x as i64).collect())),
            _ => refuse!("{name} must be an integer array, got dtype {}", numpy_name(a)),
        }
    }

    pub fn shape_of(&self, name: &str) -> String {
        self.get(name).map(|a| shape_text(&a.dims)).unwrap_or_else(|| "None".into())
    }
}
