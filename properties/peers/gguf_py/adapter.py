"""gguf-py's reference quantizers as plain NumPy calls: raw block bytes in and out, the host's
float warnings silenced (the findings in ``test_gguf_py`` are about those very casts)."""
from __future__ import annotations

import warnings

import gguf
import numpy as np


def peer(fn, *args):
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore", RuntimeWarning)
        return fn(*args)


def peer_dequantize(raw: np.ndarray, qtype: int, shape: tuple[int, int]) -> np.ndarray:
    out = peer(gguf.quants.dequantize, raw.reshape(shape[0], -1), gguf.GGMLQuantizationType(qtype))
    return np.asarray(out, dtype=np.float32).reshape(shape)


def peer_quantize(x: np.ndarray, qtype: int) -> np.ndarray:
    out = peer(gguf.quants.quantize, x, gguf.GGMLQuantizationType(qtype))
    return np.ascontiguousarray(out).view(np.uint8).reshape(x.shape[0], -1)
