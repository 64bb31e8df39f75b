"""One reader for a forward run's tensors, whatever wrote them, for ``logitcheck parity / layers``.

A run is one of:

* ``RUN.npz`` (``logitcheck forward``'s output): every floating array, ``logits`` as
  ``result_output``; ``tokens`` when present. Keys that are no known name are kept as they are.
* ``RUN.npy``: one array, the logits ``[positions, vocab]``.
* a folder (what an engine without a zip library writes): ``NAME.npy`` files, and/or raw
  little-endian float32 files ``NAME.f32`` (or ``NAME.bin``) listed in ``shapes.txt``, one line
  per tensor: ``NAME d0 d1 …`` (outermost dimension first, as NumPy and C arrays are written:
  ``l_out-3 8 64`` is 8 tokens × 64 features, 2048 bytes; ``#`` starts a comment). NAME is
  llama.cpp's graph name (``l_out-3``, ``result_norm``, ``logits``) or an HF-style module name
  (``model.layers.3``; ``logitcheck names``); an unknown name is an error. Token ids, when given:
  ``tokens.npy`` (integers) or ``tokens.txt`` (integers separated by spaces, commas or newlines).

In both a .npz and a folder, an HF-style module name with no llama.cpp graph tensor (``q_proj``:
its output precedes RoPE; gemma4's ``lm_head``: a final softcap follows it) is skipped and listed
in ``Run.skipped``, never an error and never compared.

One batch-axis rule for every reader: a tensor with three or more axes whose first axis is 1 and
whose second is the run's token count (``tokens``, else the logits' rows) is transformers'
``[batch 1, tokens, …]`` and loses its batch axis; logits ``[1, tokens, vocab]`` likewise.

Every tensor is returned as ``[first axis, everything else]`` (a vector as one row), the layout
the comparison reads: the first axis is the token. One exception, where the architecture is known:
an AltUp tensor holding every stream (``names.STREAM_OPS``: gemma3n's ``l_out-N`` =
``model.layers.N``) given with three or more axes is stream-major, ``[streams, tokens, hidden]`` or
transformers' ``[streams, 1, tokens, hidden]``, and is turned token-major (two axes: already
``[tokens, streams·hidden]``, as ``logitcheck forward`` writes it). Values are read as they are,
NaN included: what a non-finite value means is the comparison's business.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from oracle.models.architectures import ARCHS
from oracle.models.names import STREAM_OPS, normalise
from oracle.models.layers import split_name

SHAPES = "shapes.txt"
RAW_SUFFIXES = (".f32", ".bin")
_INT = re.compile(r"[\s,]+")


@dataclass
class Run:
    tensors: dict[str, np.ndarray]
    """llama.cpp graph name -> [tokens, features]."""
    tokens: np.ndarray | None
    skipped: list[str] = field(default_factory=list)
    """HF-style names in the run with no llama.cpp graph tensor: left out of every comparison."""

    def logits(self, where: Path) -> np.ndarray:
        if "result_output" not in self.tensors:
            raise ValueError(f"{where}: no logits (an array named 'logits', 'result_output' or the "
                             f"architecture's HF-style output name)")
        return self.tensors["result_output"]


def _rows(a: np.ndarray, what: str) -> np.ndarray:
    if a.dtype.kind != "f":
        raise ValueError(f"{what}: {a.dtype} values, not floating point")
    if a.ndim == 0 or a.size == 0:
        raise ValueError(f"{what}: shape {a.shape} holds no [tokens, features] tensor")
    return a.reshape(1, -1) if a.ndim == 1 else a.reshape(a.shape[0], -1)


def _n_tokens(tensors: dict[str, np.ndarray], tokens: np.ndarray | None) -> int | None:
    """The run's token count: its token ids', else its logits' rows (after a batch axis of 1)."""
    if tokens is not None:
        return int(tokens.size)
    lg = tensors.get("result_output")
    if lg is None:
        return None
    lg = np.asarray(lg)
    return int(lg.shape[1]) if lg.ndim == 3 and lg.shape[0] == 1 else (int(lg.shape[0]) if lg.ndim >= 1 else None)


def without_batch_axis(a: np.ndarray, n_tokens: int | None) -> np.ndarray:
    """``a`` without a leading batch axis of 1 (``[1, tokens, …]``, three or more axes)."""
    if n_tokens is not None and a.ndim >= 3 and a.shape[0] == 1 and a.shape[1] == n_tokens:
        return a.reshape(a.shape[1:])
    return a


def _token_major(tensors: dict[str, np.ndarray], arch: str | None, where: object,
                 tokens: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """``tensors`` (llama.cpp names) as ``[tokens, features]``; stream-major AltUp tensors
    transposed, a batch axis of 1 dropped."""
    streams = ARCHS[arch].altup_streams if arch in ARCHS else 0
    n_tokens = _n_tokens(tensors, tokens)
    out = {}
    for name, a in tensors.items():
        a = np.asarray(a)
        if not (streams and split_name(name)[0] in STREAM_OPS):
            a = without_batch_axis(a, n_tokens)
        if streams and a.ndim >= 3 and split_name(name)[0] in STREAM_OPS:
            if a.shape[0] != streams or (a.ndim == 4 and a.shape[1] != 1) or a.ndim > 4:
                raise ValueError(f"{where}[{name}]: shape {a.shape}: an AltUp tensor with {a.ndim} axes must be "
                                 f"stream-major, [{streams}, tokens, hidden] or [{streams}, 1, tokens, hidden] "
                                 f"(or token-major with two axes, [tokens, {streams}·hidden])")
            a = np.moveaxis(a.reshape(streams, a.shape[-2], a.shape[-1]), 0, 1)
        out[name] = _rows(a, f"{where}[{name}]")
    return out


def _tokens_of(a: np.ndarray, what: str) -> np.ndarray:
    if a.dtype.kind not in "iu" or a.ndim != 1:
        raise ValueError(f"{what}: token ids must be a 1-D integer array, got {a.dtype} {a.shape}")
    return a.astype(np.int64)


def _npz(path: Path, arch: str | None) -> Run:
    with np.load(path, allow_pickle=False) as z:
        floats = {k: z[k] for k in z.files if z[k].dtype.kind == "f"}
        tokens = _tokens_of(z["tokens"], f"{path}[tokens]") if "tokens" in z.files else None
    if "logits" in floats:  # llama.cpp's graph output as well as its logits (a golden): the same values
        floats.pop("result_output", None)
    skipped: list[str] = []
    named = normalise(floats, arch, strict=False, skipped=skipped)
    return Run(_token_major(named, arch, path, tokens), tokens, skipped)


def read_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """``shapes.txt``: NAME d0 d1 … per line."""
    out: dict[str, tuple[int, ...]] = {}
    for no, line in enumerate(path.read_text().splitlines(), 1):
        words = line.split("#", 1)[0].split()
        if not words:
            continue
        name, dims = words[0], words[1:]
        if not dims or not all(d.isdigit() and int(d) > 0 for d in dims):
            raise ValueError(f"{path} line {no}: want 'NAME d0 d1 ...' with positive integer dimensions, got {line!r}")
        if name in out:
            raise ValueError(f"{path} line {no}: {name!r} is listed twice")
        out[name] = tuple(int(d) for d in dims)
    return out


def _raw(folder: Path, name: str, shape: tuple[int, ...]) -> np.ndarray:
    files = [folder / (name + s) for s in RAW_SUFFIXES if (folder / (name + s)).is_file()]
    if len(files) != 1:
        raise ValueError(f"{folder / SHAPES}: {name!r} needs exactly one file {name}.f32 or {name}.bin "
                         f"(found {len(files)})")
    want = 4 * int(np.prod(shape, dtype=np.int64))
    have = files[0].stat().st_size
    if have != want:
        raise ValueError(f"{files[0]}: {have} bytes, but shape {' x '.join(map(str, shape))} in {SHAPES} "
                         f"needs {want} (little-endian float32)")
    return np.fromfile(files[0], dtype="<f4").reshape(shape)


def _folder(folder: Path, arch: str | None) -> Run:
    arrays: dict[str, np.ndarray] = {}
    for f in sorted(folder.glob("*.npy")):
        if f.stem == "tokens":
            continue
        try:
            arrays[f.stem] = np.load(f, allow_pickle=False)
        except (ValueError, OSError) as exc:
            raise ValueError(f"{f}: not a readable .npy file ({exc})") from None
    shapes = read_shapes(folder / SHAPES) if (folder / SHAPES).is_file() else {}
    for name, shape in shapes.items():
        if name in arrays:
            raise ValueError(f"{folder}: {name!r} is given both as {name}.npy and in {SHAPES}")
        arrays[name] = _raw(folder, name, shape)
    unlisted = sorted(f.name for s in RAW_SUFFIXES for f in folder.glob("*" + s) if f.stem not in shapes)
    if unlisted:
        raise ValueError(f"{folder}: {', '.join(unlisted)} not listed in {SHAPES} (a raw file needs its shape)")
    if not arrays:
        raise ValueError(f"{folder}: no tensors (NAME.npy files, or raw NAME.f32 files listed in {SHAPES})")
    skipped: list[str] = []
    named = normalise(arrays, arch, strict=True, skipped=skipped)
    if not named:
        raise ValueError(f"{folder}: no tensor with a llama.cpp graph name (skipped, no graph tensor: "
                         f"{', '.join(skipped)})")
    tokens = _folder_tokens(folder)
    return Run(_token_major(named, arch, folder, tokens), tokens, skipped)


def _folder_tokens(folder: Path) -> np.ndarray | None:
    if (folder / "tokens.npy").is_file():
        return _tokens_of(np.load(folder / "tokens.npy", allow_pickle=False), str(folder / "tokens.npy"))
    if (folder / "tokens.txt").is_file():
        words = [w for w in _INT.split((folder / "tokens.txt").read_text()) if w]
        try:
            return np.array([int(w) for w in words], np.int64)
        except ValueError:
            raise ValueError(f"{folder / 'tokens.txt'}: token ids must be integers") from None
    return None


def read_run(path: Path, arch: str | None = None) -> Run:
    """The tensors and tokens of the run at ``path`` (a .npz, a .npy or a folder); ``arch``
    decides HF-style names that differ between architectures. ValueError for bad input."""
    path = Path(path)
    if path.is_dir():
        return _folder(path, arch)
    if not path.is_file():
        raise ValueError(f"{path}: no such file or folder")
    try:
        z = np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError) as exc:
        raise ValueError(f"{path}: not a run (.npz from 'logitcheck forward', .npy logits, or a folder of "
                         f".npy / raw float32 files) ({exc.__class__.__name__})") from None
    if isinstance(z, np.ndarray):
        return Run({"result_output": _rows(without_batch_axis(z, _n_tokens({"result_output": z}, None)), str(path))},
                   None)
    z.close()
    return _npz(path, arch)
