"""A GGUF decoder model for the float64 forward pass: metadata, hyperparameters and weights.

Read with gguf-py; every weight is decoded by the oracle's own quant formats
(``oracle.quants.dequantize``), exactly, and widened to float64 on first use. The stored type
of every tensor is kept: an engine's legal rounding (what it does to activations before a
quantized product) depends on it, and the error models read it from here.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from oracle.models.architectures import Hparams, hparams
from oracle.quants import dequantize


@dataclass(frozen=True)
class StoredTensor:
    qtype: int
    shape: tuple[int, ...]
    """NumPy order: the last axis is ggml's ne0 (a row)."""
    raw: np.ndarray


@dataclass
class Model:
    path: str
    kv: dict[str, Any]
    hp: Hparams
    stored: dict[str, StoredTensor]
    _cache: dict[str, np.ndarray] = field(default_factory=dict, repr=False)

    def has(self, name: str) -> bool:
        return name in self.stored

    def weight(self, name: str) -> np.ndarray:
        """The float64 values of tensor ``name`` (decoded once, then cached)."""
        if name not in self._cache:
            if name not in self.stored:
                raise ValueError(f"{self.path}: tensor {name!r} is missing (a {self.hp.arch} model needs it)")
            t = self.stored[name]
            self._cache[name] = dequantize(t.raw, t.qtype, t.shape).astype(np.float64)
        return self._cache[name]

    def qtype(self, name: str) -> int:
        return self.stored[name].qtype

    def output_name(self) -> str:
        """llama.cpp falls back to the embedding when a model has no separate output matrix."""
        return "output.weight" if "output.weight" in self.stored else "token_embd.weight"


def _contents(field_: Any) -> Any:
    try:
        return field_.contents()
    except Exception:  # a field gguf-py cannot render is not one the forward pass reads
        return None


def load_model(path: os.PathLike[str] | str) -> Model:
    """Read ``path``; ValueError naming the file for anything that is not a loadable model."""
    from gguf import GGUFReader

    try:
        reader = GGUFReader(os.fspath(path))
    except Exception as exc:  # gguf-py raises several types for a bad file; one clear error here
        raise ValueError(f"{path}: not a readable GGUF file ({type(exc).__name__}: {exc})") from None
    kv = {k: _contents(f) for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    stored = {}
    for t in reader.tensors:
        shape = tuple(int(d) for d in reversed(t.shape.tolist()))
        stored[t.name] = StoredTensor(int(t.tensor_type), shape,
                                      np.array(t.data, copy=True).reshape(-1).view(np.uint8))
    del reader
    if "token_embd.weight" not in stored:
        raise ValueError(f"{path}: no token_embd.weight tensor: not a decoder model the forward pass can run")
    try:
        hp = hparams(kv, stored["token_embd.weight"].shape[0])
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    return Model(os.fspath(path), kv, hp, stored)
