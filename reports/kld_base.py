"""llama-perplexity's ``--kl-divergence-base`` file: read it as a parity reference, write one.

Layout (tools/perplexity/perplexity.cpp): the 8 bytes ``_logits_``; n_ctx (uint32), n_vocab
(int32), n_chunk (int32); the n_chunk·n_ctx evaluated token ids (int32); then for every chunk
the positions ``n_ctx/2 … n_ctx-2`` (each predicts the next token), one row of
``nv = 2·⌈n_vocab/2⌉ + 4`` uint16 each: two float32 (scale, min_log_prob) in the first four,
then per token q with ``log p = scale·q + min_log_prob``; logits more than 16 below the row's
maximum are stored as q = 0 and skipped by the KL sum (log p <= -16).
"""
from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

MAGIC = b"_logits_"
FLOOR = -16.0


@dataclass(frozen=True)
class KldBase:
    n_ctx: int
    n_vocab: int
    n_chunk: int
    tokens: np.ndarray
    logprobs: np.ndarray
    """[n_chunk · (n_ctx - 1 - n_ctx/2), n_vocab], float64."""

    @property
    def first(self) -> int:
        return self.n_ctx // 2

    def rows(self) -> np.ndarray:
        """For each stored row, the index of its position in the chunked token stream."""
        per = np.arange(self.first, self.n_ctx - 1)
        return (np.arange(self.n_chunk)[:, None] * self.n_ctx + per[None, :]).ravel()

    def next_tokens(self) -> np.ndarray:
        return self.tokens[self.rows() + 1]


def is_kld_base(path: os.PathLike[str] | str) -> bool:
    with open(path, "rb") as f:
        return f.read(8) == MAGIC


def read(path: os.PathLike[str] | str) -> KldBase:
    data = open(path, "rb").read()
    if data[:8] != MAGIC:
        raise ValueError(f"{path}: not a llama-perplexity KL-divergence base file (no '_logits_' magic)")
    if len(data) < 20:
        raise ValueError(f"{path}: truncated header")
    n_ctx = int(np.frombuffer(data, np.uint32, 1, 8)[0])
    n_vocab, n_chunk = (int(v) for v in np.frombuffer(data, np.int32, 2, 12))
    if n_ctx < 3 or n_vocab < 1 or n_chunk < 1:
        raise ValueError(f"{path}: implausible header n_ctx={n_ctx} n_vocab={n_vocab} n_chunk={n_chunk}")
    nv = 2 * ((n_vocab + 1) // 2) + 4
    n_rows = n_chunk * (n_ctx - 1 - n_ctx // 2)
    tok_end = 20 + 4 * n_ctx * n_chunk
    if len(data) != tok_end + 2 * nv * n_rows:
        raise ValueError(f"{path}: {len(data)} bytes, the header announces {tok_end + 2 * nv * n_rows}")
    tokens = np.frombuffer(data, np.int32, n_ctx * n_chunk, 20).astype(np.int64)
    raw = np.frombuffer(data, np.uint16, nv * n_rows, tok_end).reshape(n_rows, nv)
    head = raw[:, :4].copy().view(np.float32)  # [rows, 2]: scale, min_log_prob
    lp = head[:, :1].astype(np.float64) * raw[:, 4:4 + n_vocab] + head[:, 1:2].astype(np.float64)
    return KldBase(n_ctx, n_vocab, n_chunk, tokens, lp)


def write(path: os.PathLike[str] | str, logits: np.ndarray, tokens: np.ndarray, n_ctx: int) -> None:
    """A base file for ``logits`` [n_chunk·n_ctx, n_vocab] of ``tokens`` (same length), as
    llama-perplexity writes it (float32 arithmetic, round-half-up codes)."""
    lg = np.asarray(logits, np.float32)
    toks = np.asarray(tokens, np.int32)
    n_pos, n_vocab = lg.shape
    if n_pos % n_ctx or toks.size != n_pos:
        raise ValueError(f"{n_pos} logit rows and {toks.size} tokens are not whole chunks of {n_ctx}")
    nv = 2 * ((n_vocab + 1) // 2) + 4
    first = n_ctx // 2
    rows = (np.arange(n_pos // n_ctx)[:, None] * n_ctx + np.arange(first, n_ctx - 1)[None, :]).ravel()
    x = lg[rows].astype(np.float64)
    mx, mn = x.max(axis=1, keepdims=True), x.min(axis=1, keepdims=True)
    mn = np.maximum(mn, mx - 16)
    lse = np.log(np.exp(x - mx).sum(axis=1, keepdims=True))
    scale = ((mx - mn) / 65535.0).astype(np.float32)
    min_lp = (mn - mx - lse).astype(np.float32)
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where((x > mn) & (scale > 0), np.floor((x - mn) / scale + 0.5), 0).astype(np.uint16)
    out = np.zeros((rows.size, nv), np.uint16)
    out[:, :4] = np.concatenate([scale, min_lp], axis=1).view(np.uint16)
    out[:, 4:4 + n_vocab] = q
    with open(path, "wb") as f:
        f.write(MAGIC + np.array([n_ctx], np.uint32).tobytes() + np.array([n_vocab, n_pos // n_ctx], np.int32).tobytes()
                + toks.tobytes() + out.tobytes())
