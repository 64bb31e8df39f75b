"""A GGUF decoder model for the float64 forward pass: metadata, hyperparameters and weights.

Read with gguf-py; every weight is decoded by the oracle's own quant formats
(``oracle.quants.dequantize``), exactly, and widened to float64 when it is first asked for.
The stored type of every tensor is kept: an engine's legal rounding (what it does to activations
before a quantized product) depends on it, and the error models read it from here.

Memory: the stored bytes stay in gguf-py's memory map (the file's pages, not a copy). A model
whose float64 weights fit in ``RESIDENT_MAX_BYTES`` keeps every decoded tensor (repeated passes,
the error models' many runs, pay the decoding once). A bigger one keeps only the tensors of the
group it was last asked for (one layer's ``blk.N.*``, or the tensors outside the blocks): asking
for layer N+1 drops layer N, so a pass holds about one layer's float64 weights at a time, plus
whatever its caller still references. A tensor still referenced is handed out again rather than
decoded twice, and ``Weights.live_bytes`` / ``peak_bytes`` count what is alive, for the tests.
"""
from __future__ import annotations

import os
import re
import weakref
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from oracle.models.architectures import Hparams, hparams
from oracle.quants import dequantize

RESIDENT_MAX_BYTES = 1 << 30
"""Float64 weights up to this size stay decoded; above it they are decoded layer by layer."""
SLAB_ELEMENTS = 1 << 22
"""Decode a big tensor this many elements at a time into its float64 result: the float32
temporary stays small (decoding is per block, so slabs of whole rows give the same bits)."""
_LAYER = re.compile(r"^blk\.(\d+)\.")


@dataclass(frozen=True)
class StoredTensor:
    qtype: int
    shape: tuple[int, ...]
    """NumPy order: the last axis is ggml's ne0 (a row)."""
    raw: np.ndarray
    """The stored bytes (a view of the memory-mapped file)."""

    @property
    def float64_bytes(self) -> int:
        return 8 * int(np.prod(self.shape, dtype=np.int64))


def group_of(name: str) -> int:
    """The layer a tensor belongs to (``blk.N.…``), -1 for the tensors outside the blocks."""
    m = _LAYER.match(name)
    return int(m.group(1)) if m else -1


def decode(t: StoredTensor) -> np.ndarray:
    """The float64 values of one stored tensor, decoded a slab of whole rows at a time."""
    n = t.shape[-1] if t.shape else 1
    rows = t.float64_bytes // 8 // max(n, 1)
    if rows * n <= SLAB_ELEMENTS or len(t.shape) < 2:
        return dequantize(t.raw, t.qtype, t.shape).astype(np.float64)
    out = np.empty((rows, n), np.float64)
    row_bytes = t.raw.size // rows
    step = max(1, SLAB_ELEMENTS // n)
    for r in range(0, rows, step):
        k = min(step, rows - r)
        out[r:r + k] = dequantize(t.raw[r * row_bytes:(r + k) * row_bytes], t.qtype, (k, n))
    return out.reshape(t.shape)


class Weights:
    """Decoded float64 tensors, kept all (``resident``) or one group at a time."""

    def __init__(self, stored: dict[str, StoredTensor], resident: bool) -> None:
        self.stored, self.resident = stored, resident
        self._held: dict[str, np.ndarray] = {}
        self._alive: dict[str, weakref.ref] = {}
        self.live_bytes = 0
        self.peak_bytes = 0
        self.decoded = 0
        """How many tensors were decoded (a tensor dropped and asked for again counts twice)."""

    def _gone(self, nbytes: int) -> None:
        self.live_bytes -= nbytes

    def get(self, name: str) -> np.ndarray:
        if name in self._held:
            return self._held[name]
        ref = self._alive.get(name)
        w = ref() if ref is not None else None
        if not self.resident:
            g = group_of(name)
            self._held = {n: v for n, v in self._held.items() if group_of(n) == g}
        if w is None:
            w = decode(self.stored[name])
            w.flags.writeable = False  # handed out to every caller that asks: nobody may change it
            self.decoded += 1
            self.live_bytes += w.nbytes
            self.peak_bytes = max(self.peak_bytes, self.live_bytes)
            weakref.finalize(w, self._gone, w.nbytes)
            self._alive[name] = weakref.ref(w)
        self._held[name] = w
        return w


@dataclass
class Model:
    path: str
    kv: dict[str, Any]
    hp: Hparams
    stored: dict[str, StoredTensor]
    resident: bool | None = None
    """Keep every decoded weight (None: when the float64 weights fit in RESIDENT_MAX_BYTES)."""
    weights: Weights = field(init=False, repr=False)

    def __post_init__(self) -> None:
        total = sum(t.float64_bytes for t in self.stored.values())
        keep = total <= RESIDENT_MAX_BYTES if self.resident is None else self.resident
        self.weights = Weights(self.stored, keep)

    def has(self, name: str) -> bool:
        return name in self.stored

    def weight(self, name: str) -> np.ndarray:
        """The float64 values of tensor ``name`` (read-only to callers: it may be handed out again)."""
        if name not in self.stored:
            raise ValueError(f"{self.path}: tensor {name!r} is missing (a {self.hp.arch} model needs it)")
        return self.weights.get(name)

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


def load_model(path: os.PathLike[str] | str, resident: bool | None = None) -> Model:
    """Read ``path``; ValueError naming the file for anything that is not a loadable model.
    ``resident``: keep every decoded weight (True), decode layer by layer (False), or decide
    from the size (None)."""
    from gguf import GGUFReader

    try:
        reader = GGUFReader(os.fspath(path))
    except Exception as exc:  # gguf-py raises several types for a bad file; one clear error here
        raise ValueError(f"{path}: not a readable GGUF file ({type(exc).__name__}: {exc})") from None
    kv = {k: _contents(f) for k, f in reader.fields.items() if not k.startswith("GGUF.")}
    stored = {}
    for t in reader.tensors:
        shape = tuple(int(d) for d in reversed(t.shape.tolist()))
        stored[t.name] = StoredTensor(int(t.tensor_type), shape, t.data.reshape(-1).view(np.uint8))
    del reader  # the tensors' views keep the memory map open
    if "token_embd.weight" not in stored:
        raise ValueError(f"{path}: no token_embd.weight tensor: not a decoder model the forward pass can run")
    try:
        hp = hparams(kv, stored["token_embd.weight"].shape[0])
    except ValueError as exc:
        raise ValueError(f"{path}: {exc}") from None
    return Model(os.fspath(path), kv, hp, stored, resident)
