//! Framing of logitcheck's harness protocol, version 2 (docs/protocol.md): ASCII header lines
//! and raw little-endian arrays in C order; every answer echoes its call's id. Version 1 (no
//! ids) is spoken when logitcheck greets with it. Nothing here knows what a function computes.

use std::cell::{Cell, RefCell};
use std::io::{self, BufRead, Read, Write};

use crate::error::Error;

pub const VERSION: u32 = 2;

thread_local! {
    /// The version agreed at the greeting (1 until then).
    static SPOKEN: Cell<u32> = const { Cell::new(1) };
    /// The id of the call being answered: the answer writers echo it (version 2), so a late or
    /// repeated answer can never be taken for another call's.
    static CALL_ID: RefCell<String> = const { RefCell::new(String::new()) };
}

/// The greeting `LOGITCHECK <n>`: the version spoken from now on (the lower of n and
/// `VERSION`), or `None` if the line is no greeting.
pub fn greeting(line: &str) -> Option<u32> {
    let n: u32 = line.strip_prefix("LOGITCHECK ")?.parse().ok()?;
    if n == 0 {
        return None;
    }
    let v = n.min(VERSION);
    SPOKEN.with(|s| s.set(v));
    Some(v)
}

pub fn spoken() -> u32 {
    SPOKEN.with(|s| s.get())
}

/// `<tag> <id>` in version 2, `<tag>` in version 1: how an answer line starts.
fn answer_tag(tag: &str) -> String {
    if spoken() >= 2 {
        CALL_ID.with(|id| format!("{tag} {}", id.borrow()))
    } else {
        tag.to_string()
    }
}
const MAX_HEADER: usize = 4096;
/// A request announcing more elements than this is malformed (no allocation is attempted).
const MAX_ELEMENTS: u64 = 1 << 34;

/// The elements of one array, by wire dtype.
#[derive(Debug, Clone)]
pub enum Data {
    F32(Vec<f32>),
    F64(Vec<f64>),
    I64(Vec<i64>),
    I32(Vec<i32>),
    U8(Vec<u8>),
    Str(String),
}

#[derive(Debug, Clone)]
pub struct Array {
    pub dims: Vec<usize>,
    pub data: Data,
}

impl Array {
    pub fn f32(dims: Vec<usize>, values: Vec<f32>) -> Self {
        debug_assert_eq!(dims.iter().product::<usize>(), values.len());
        Array { dims, data: Data::F32(values) }
    }

    pub fn i64(dims: Vec<usize>, values: Vec<i64>) -> Self {
        debug_assert_eq!(dims.iter().product::<usize>(), values.len());
        Array { dims, data: Data::I64(values) }
    }

    pub fn ndim(&self) -> usize {
        self.dims.len()
    }

    pub fn dtype(&self) -> &'static str {
        match self.data {
            Data::F32(_) => "f32",
            Data::F64(_) => "f64",
            Data::I64(_) => "i64",
            Data::I32(_) => "i32",
            Data::U8(_) => "u8",
            Data::Str(_) => "str",
        }
    }

    /// Python-style shape text, `(3,)` or `(2, 4)`, for messages.
    pub fn shape_text(&self) -> String {
        shape_text(&self.dims)
    }
}

pub fn shape_text(dims: &[usize]) -> String {
    match dims.len() {
        0 => "()".to_string(),
        1 => format!("({},)", dims[0]),
        _ => format!("({})", dims.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")),
    }
}

/// One request from logitcheck.
pub enum Request {
    Call { function: String, args: Vec<(String, Array)> },
    Quit,
}

/// A request that does not follow the protocol: the stream cannot be trusted after it.
#[derive(Debug)]
pub struct FrameError(pub String);

impl From<io::Error> for FrameError {
    fn from(e: io::Error) -> Self {
        FrameError(format!("i/o error: {e}"))
    }
}

/// One header line without its newline; `None` at end of input.
pub fn read_header(input: &mut impl BufRead) -> Result<Option<String>, FrameError> {
    let mut line = Vec::with_capacity(128);
    let n = Read::take(&mut *input, MAX_HEADER as u64 + 1).read_until(b'\n', &mut line)?;
    if n == 0 {
        return Ok(None);
    }
    if line.last() != Some(&b'\n') {
        return Err(FrameError(format!("header line unterminated or longer than {MAX_HEADER} bytes")));
    }
    line.pop();
    String::from_utf8(line).map(Some).map_err(|_| FrameError("header line is not ASCII".into()))
}

/// The next request; `None` at end of input.
pub fn read_request(input: &mut impl BufRead) -> Result<Option<Request>, FrameError> {
    let Some(line) = read_header(input)? else { return Ok(None) };
    let fields: Vec<&str> = line.split(' ').collect();
    let v2 = spoken() >= 2;
    match fields.as_slice() {
        ["QUIT"] => Ok(Some(Request::Quit)),
        ["CALL", id, function, nargs] if v2 => {
            CALL_ID.with(|c| *c.borrow_mut() = id.to_string());
            let nargs: usize = nargs.parse().map_err(|_| FrameError(format!("bad CALL line {line:?}")))?;
            let mut args = Vec::with_capacity(nargs);
            for _ in 0..nargs {
                args.push(read_arg(input)?);
            }
            Ok(Some(Request::Call { function: function.to_string(), args }))
        }
        ["CALL", function, nargs] if !v2 => {
            let nargs: usize = nargs.parse().map_err(|_| FrameError(format!("bad CALL line {line:?}")))?;
            let mut args = Vec::with_capacity(nargs);
            for _ in 0..nargs {
                args.push(read_arg(input)?);
            }
            Ok(Some(Request::Call { function: function.to_string(), args }))
        }
        _ => Err(FrameError(format!("expected CALL or QUIT, got {:?}", truncate(&line, 120)))),
    }
}

fn read_arg(input: &mut impl BufRead) -> Result<(String, Array), FrameError> {
    let line = read_header(input)?.ok_or_else(|| FrameError("end of input inside a CALL".into()))?;
    let fields: Vec<&str> = line.split(' ').collect();
    if fields.len() < 4 || fields[0] != "ARG" {
        return Err(FrameError(format!("expected an ARG header, got {:?}", truncate(&line, 120))));
    }
    let name = fields[1].to_string();
    let bad = || FrameError(format!("bad ARG header {:?}", truncate(&line, 120)));
    let ndim: usize = fields[3].parse().map_err(|_| bad())?;
    if fields.len() != 4 + ndim {
        return Err(bad());
    }
    let dims = fields[4..].iter().map(|d| d.parse::<usize>()).collect::<Result<Vec<_>, _>>().map_err(|_| bad())?;
    let count = dims.iter().try_fold(1u64, |acc, &d| acc.checked_mul(d as u64)).unwrap_or(u64::MAX);
    if count > MAX_ELEMENTS {
        return Err(bad());
    }
    let count = count as usize;
    let data = match fields[2] {
        "f32" => Data::F32(read_le(input, count, f32::from_le_bytes)?),
        "f64" => Data::F64(read_le(input, count, f64::from_le_bytes)?),
        "i64" => Data::I64(read_le(input, count, i64::from_le_bytes)?),
        "i32" => Data::I32(read_le(input, count, i32::from_le_bytes)?),
        "u8" => Data::U8(read_le(input, count, u8::from_le_bytes)?),
        "str" => {
            let bytes = read_le(input, count, u8::from_le_bytes)?;
            Data::Str(String::from_utf8_lossy(&bytes).into_owned())
        }
        other => return Err(FrameError(format!("unknown dtype {other:?}"))),
    };
    Ok((name, Array { dims, data }))
}

fn read_le<T, const N: usize>(input: &mut impl BufRead, count: usize, decode: fn([u8; N]) -> T)
    -> Result<Vec<T>, FrameError> {
    let mut raw = vec![0u8; count * N];
    input.read_exact(&mut raw)?;
    Ok(raw.chunks_exact(N).map(|c| decode(c.try_into().expect("chunk of N bytes"))).collect())
}

/// Handshake answer: name, functions, claims, `END`.
pub fn write_handshake(out: &mut impl Write, name: &str, functions: &[&str], claims: &[&str]) -> io::Result<()> {
    writeln!(out, "LOGITCHECK {} {name}", spoken())?;
    for f in functions {
        writeln!(out, "FUNCTION {f}")?;
    }
    for c in claims {
        writeln!(out, "CLAIM {c}")?;
    }
    writeln!(out, "END")?;
    out.flush()
}

/// `OK <n>` and the results.
pub fn write_results(out: &mut impl Write, results: &[Array]) -> io::Result<()> {
    let mut buf: Vec<u8> = Vec::new();
    writeln!(buf, "{} {}", answer_tag("OK"), results.len())?;
    for r in results {
        let dims: Vec<String> = r.dims.iter().map(|d| d.to_string()).collect();
        let sep = if dims.is_empty() { "" } else { " " };
        writeln!(buf, "RESULT {} {}{}{}", r.dtype(), r.ndim(), sep, dims.join(" "))?;
        match &r.data {
            Data::F32(v) => v.iter().for_each(|x| buf.extend_from_slice(&x.to_le_bytes())),
            Data::F64(v) => v.iter().for_each(|x| buf.extend_from_slice(&x.to_le_bytes())),
            Data::I64(v) => v.iter().for_each(|x| buf.extend_from_slice(&x.to_le_bytes())),
            Data::I32(v) => v.iter().for_each(|x| buf.extend_from_slice(&x.to_le_bytes())),
            Data::U8(v) => buf.extend_from_slice(v),
            Data::Str(s) => buf.extend_from_slice(s.as_bytes()),
        }
    }
    out.write_all(&buf)?;
    out.flush()
}

/// `ERROR <kind> <message>` on one printable-ASCII line.
pub fn write_error(out: &mut impl Write, err: &Error) -> io::Result<()> {
    let clean: String = err.message().chars()
        .map(|c| if c.is_ascii_graphic() || c == ' ' { c } else { '?' })
        .collect();
    writeln!(out, "{} {} {}", answer_tag("ERROR"), err.kind(), truncate(&clean, 600))?;
    out.flush()
}

fn truncate(s: &str, n: usize) -> &str {
    match s.char_indices().nth(n) {
        Some((i, _)) => &s[..i],
        None => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_round_trip() {
        let mut wire = b"CALL top_k 2\nARG logits f32 2 1 2\n".to_vec();
        wire.extend_from_slice(&1.5f32.to_le_bytes());
        wire.extend_from_slice(&(-2.0f32).to_le_bytes());
        wire.extend_from_slice(b"ARG k i64 0\n");
        wire.extend_from_slice(&7i64.to_le_bytes());
        wire.extend_from_slice(b"QUIT\n");
        let mut input = &wire[..];
        let Some(Request::Call { function, args }) = read_request(&mut input).unwrap() else { panic!("no call") };
        assert_eq!(function, "top_k");
        assert_eq!(args[0].1.dims, [1, 2]);
        assert!(matches!(&args[0].1.data, Data::F32(v) if v == &[1.5, -2.0]));
        assert!(matches!(&args[1].1.data, Data::I64(v) if v == &[7]));
        assert!(matches!(read_request(&mut input).unwrap(), Some(Request::Quit)));
        assert!(read_request(&mut input).unwrap().is_none());
    }

    #[test]
    fn version_2_echoes_the_call_id() {
        assert_eq!(greeting("LOGITCHECK 3"), Some(2));
        assert_eq!(greeting("HELLO"), None);
        let mut wire = b"CALL 17 greedy 1\nARG logits f32 1 1\n".to_vec();
        wire.extend_from_slice(&0.5f32.to_le_bytes());
        let mut input = &wire[..];
        let Some(Request::Call { function, .. }) = read_request(&mut input).unwrap() else { panic!("no call") };
        assert_eq!(function, "greedy");
        let mut out = Vec::new();
        write_results(&mut out, &[Array::i64(vec![1], vec![0])]).unwrap();
        assert!(out.starts_with(b"OK 17 1\nRESULT i64 1 1\n"));
        let mut out = Vec::new();
        write_error(&mut out, &Error::Refused("no".into())).unwrap();
        assert_eq!(out, b"ERROR 17 refused no\n");
        greeting("LOGITCHECK 1");
    }

    #[test]
    fn results_and_errors() {
        let mut out = Vec::new();
        write_results(&mut out, &[Array::i64(vec![2], vec![3, 4])]).unwrap();
        let mut want = b"OK 1\nRESULT i64 1 2\n".to_vec();
        want.extend_from_slice(&3i64.to_le_bytes());
        want.extend_from_slice(&4i64.to_le_bytes());
        assert_eq!(out, want);
        let mut out = Vec::new();
        write_error(&mut out, &Error::Refused("bad\nrow".into())).unwrap();
        assert_eq!(out, b"ERROR refused bad?row\n");
    }
}
