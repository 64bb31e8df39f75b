"""A llama GGUF of any size in Q4_K, fast to write: for the bounded-memory forward pass.

The fixtures' tiny models are encoded from float weights (``fixtures/kquant_encode.py``), which
is too slow for a few hundred million parameters. Here every Q4_K block is drawn directly: random
6-bit scales and mins, random 4-bit codes, and one f16 ``d`` with ``dmin = 7.5·d`` per tensor, so a
weight ``d·sc·q - dmin·m`` has mean about 0 (E[sc·q] = 31.5·7.5, E[m] = 31.5) and a standard
deviation near ``std`` (sd(sc·q - 7.5·m) is about 260). Norms are F32 around 1. The tokenizer is
left out: the oracle feeds token ids directly.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import gguf
import numpy as np

from fixtures import gguf_gen

QK, Q4K_BYTES = 256, 144
SD_UNIT = 260.0
"""About sd(sc·q - 7.5·m) for uniform 6-bit sc, m and 4-bit q: d = std / SD_UNIT."""


@dataclass(frozen=True)
class Shape:
    hidden: int
    n_layer: int
    n_ff: int
    n_vocab: int
    n_head: int
    n_kv: int
    tied: bool = False
    """No output.weight: the output projection is the embedding, as llama.cpp falls back to."""

    def matrices(self) -> dict[str, tuple[int, int]]:
        """name -> (rows, cols) of every Q4_K matrix."""
        h, hd = self.hidden, self.hidden // self.n_head
        out = {"token_embd.weight": (self.n_vocab, h)} | ({} if self.tied else {"output.weight": (self.n_vocab, h)})
        for i in range(self.n_layer):
            p = f"blk.{i}."
            out |= {p + "attn_q.weight": (h, h), p + "attn_k.weight": (self.n_kv * hd, h),
                    p + "attn_v.weight": (self.n_kv * hd, h), p + "attn_output.weight": (h, h),
                    p + "ffn_gate.weight": (self.n_ff, h), p + "ffn_up.weight": (self.n_ff, h),
                    p + "ffn_down.weight": (h, self.n_ff)}
        return out

    def norms(self) -> list[str]:
        return ["output_norm.weight"] + [f"blk.{i}.{n}.weight" for i in range(self.n_layer)
                                          for n in ("attn_norm", "ffn_norm")]

    @property
    def parameters(self) -> int:
        return sum(r * c for r, c in self.matrices().values()) + len(self.norms()) * self.hidden


def q4_k_blocks(rng: np.random.Generator, rows: int, cols: int, std: float) -> np.ndarray:
    """[rows, cols/256·144] Q4_K bytes whose weights have mean ~0 and sd ~std."""
    if cols % QK:
        raise ValueError(f"Q4_K rows must be whole 256-element blocks, got {cols}")
    blocks = rng.integers(0, 256, (rows * cols // QK, Q4K_BYTES), dtype=np.uint8)
    d = np.float16(std / SD_UNIT)
    blocks[:, 0:2] = np.array([d], "<f2").view(np.uint8)
    blocks[:, 2:4] = np.array([np.float16(7.5 * float(d))], "<f2").view(np.uint8)
    return blocks.reshape(rows, cols // QK * Q4K_BYTES)


def write(path: os.PathLike[str] | str, shape: Shape, seed: int = 0, std: float = 0.02) -> Path:
    """Write a llama model of ``shape`` to ``path``."""
    rng = np.random.default_rng(seed)
    w = gguf.GGUFWriter(os.fspath(path), "llama")
    w.add_name("logitcheck-sized-llama-Q4_K")
    w.add_file_type(15)
    w.add_quantization_version(gguf.GGML_QUANT_VERSION)
    gguf_gen.add_geometry(w, shape.hidden, shape.n_layer, shape.n_ff, shape.n_head, shape.n_kv, n_ctx=4096, eps=1e-5)
    w.add_rope_dimension_count(shape.hidden // shape.n_head)
    w.add_rope_freq_base(10000.0)
    w.add_vocab_size(shape.n_vocab)
    for name, (rows, cols) in shape.matrices().items():
        w.add_tensor(name, q4_k_blocks(rng, rows, cols, std), raw_dtype=gguf.GGMLQuantizationType.Q4_K)
    for name in shape.norms():
        w.add_tensor(name, (1.0 + 0.1 * rng.standard_normal(shape.hidden)).astype(np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return Path(path)
