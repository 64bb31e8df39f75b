"""Replays of the MLX ledger entries (``properties/peers/llama_cpp/findings.py`` holds the one
ledger; entries naming ``engine="mlx"`` replay through these). Each returns (what MLX gives,
what the llama.cpp oracle gives) in the recorded shapes."""
from __future__ import annotations

import numpy as np

from oracle.engines import Settings
from oracle.engines import llama_cpp as o_llama


def _kept(p: np.ndarray) -> list[int]:
    return np.flatnonzero(np.asarray(p) > 0).tolist()


def top_k_at_least_vocab() -> tuple[dict, dict]:
    """make_sampler(top_k=4) on a 4-token row: MLX raises, llama.cpp keeps every token."""
    from properties.peers.mlx import adapter

    try:
        adapter.chain(np.zeros(4, dtype=np.float32), Settings(top_k=4))
        got = {"result": "no error"}
    except ValueError:
        got = {"result": "ValueError"}
    return got, {"kept": _kept(o_llama.distribution(np.zeros(4), Settings(top_k=4)))}


def negative_temperature() -> tuple[dict, dict]:
    """temp = -1 on logits [0, 4]: MLX samples softmax(l / -1) (token 0 with p = 0.982: 1,000
    seeded draws, seed 0), llama.cpp's temp(t <= 0) is greedy (token 1)."""
    from properties.peers.mlx import adapter

    d = adapter.draws(np.array([0.0, 4.0], dtype=np.float32), Settings(temperature=-1.0), 1000, 0)
    got = {"most drawn": int(np.bincount(d, minlength=2).argmax())}
    return got, {"most drawn": int(np.argmax(o_llama.distribution(np.array([0.0, 4.0]), Settings(temperature=-1.0))))}


def xtc_keeps_tied_least_above() -> tuple[dict, dict]:
    """XTC (probability 1, threshold 0.1) on p = (0.4, 0.3, 0.3): MLX keeps both tokens tied at
    the least p above the threshold, llama.cpp keeps one of them."""
    from oracle.candidates import TokenDataArray
    from oracle.samplers.xtc import apply_xtc_cut
    from properties.peers.mlx import adapter

    row = np.log(np.array([0.4, 0.3, 0.3], dtype=np.float32))
    got = np.flatnonzero(np.isfinite(adapter.chain(row, Settings(), xtc=(1.0, 0.1)))).tolist()
    cur = TokenDataArray.from_logits(row.astype(np.float64))
    apply_xtc_cut(cur, 0.1, 1)
    return {"kept": got}, {"kept count": int(cur.size)}
