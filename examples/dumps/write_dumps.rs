//! Dump a forward pass's tensors for `logitcheck layers` / `logitcheck parity`, standard library only.
//!
//! `dump` writes DIR/NAME.npy (NumPy's format: a 10-byte preamble, a text header padded to 64
//! bytes, then the values as little-endian float32, row-major, the token first). NAME is an
//! HF-style module name (`model.layers.3`; `logitcheck names`) or llama.cpp's graph name.
//! Build and run: rustc --edition 2021 -O write_dumps.rs && mkdir -p out && ./write_dumps out
use std::fs::File;
use std::io::{BufWriter, Write};

fn dump(dir: &str, name: &str, x: &[f32], dims: &[usize]) -> std::io::Result<()> {
    let shape: Vec<String> = dims.iter().map(|d| d.to_string()).collect();
    let mut head = format!("{{'descr': '<f4', 'fortran_order': False, 'shape': ({},), }}", shape.join(", "));
    while (10 + head.len() + 1) % 64 != 0 {
        head.push(' ');
    }
    head.push('\n');
    let mut f = BufWriter::new(File::create(format!("{dir}/{name}.npy"))?);
    f.write_all(b"\x93NUMPY\x01\x00")?;
    f.write_all(&(head.len() as u16).to_le_bytes())?;
    f.write_all(head.as_bytes())?;
    for v in x {
        f.write_all(&v.to_le_bytes())?;
    }
    f.flush()
}

// A stand-in for an engine's activations: value(t, j) = ((t*31 + j*7 + salt) % 97) / 97 - 0.5 in f32.
const T: usize = 4;
const HIDDEN: usize = 8;
const VOCAB: usize = 16;

fn fill(cols: usize, salt: usize) -> Vec<f32> {
    let mut x = vec![0f32; T * cols];
    for t in 0..T {
        for j in 0..cols {
            x[t * cols + j] = ((t * 31 + j * 7 + salt) % 97) as f32 / 97.0 - 0.5;
        }
    }
    x
}

fn main() -> std::io::Result<()> {
    let dir = std::env::args().nth(1).expect("usage: write_dumps DIR (an existing folder)");
    let names = ["model.embed_tokens", "model.layers.0", "model.layers.1", "model.norm"];
    for (i, name) in names.iter().enumerate() {
        dump(&dir, name, &fill(HIDDEN, i), &[T, HIDDEN])?;
    }
    dump(&dir, "lm_head", &fill(VOCAB, 4), &[T, VOCAB])?; // the logits (no final softcap in llama)
    std::fs::write(format!("{dir}/tokens.txt"), "1 5 9 13\n") // the token ids the pass ran on
}
