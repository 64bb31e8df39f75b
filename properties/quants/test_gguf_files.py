"""GGUF fixtures: deterministic generation, all-or-nothing loading (with a corruption property),
agreement of the loaded bytes with the oracle and gguf-py, and llama.cpp loading every tiny
model (in a subprocess, so a llama.cpp abort fails one test instead of killing pytest)."""
from __future__ import annotations

import importlib.util
import json
import logging
import subprocess
import sys
from pathlib import Path

import gguf
import numpy as np
import pytest
from hypothesis import given, strategies as st

import oracle.quants as oq
from fixtures import gguf_gen
from fixtures.gguf_layout import walk
from fixtures.loader import GGUFLoadError, load
from properties.quants.records import RECORDS
from properties.numerics import U32
from properties.quants.checks import bit_mismatch

logging.getLogger("gguf").setLevel(logging.WARNING)
MODELS = gguf_gen.MODELS
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def fixture_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("gguf-fixtures")
    gguf_gen.ensure(root, seed=0, qtypes=[r.qtype for r in RECORDS], models=MODELS)
    return root


@pytest.mark.parametrize("kind, key", [("format", "Q4_K"), ("format", "BF16"), ("model", ("gemma2", "Q4_K")),
                                       ("model", ("qwen3", "F16"))], ids=str)
def test_same_seed_same_bytes(fixture_dir, tmp_path, kind, key):
    if kind == "format":
        again = gguf_gen.write_format_file(tmp_path / "x.gguf", oq.QType[key], seed=0)
        first = gguf_gen.format_path(oq.QType[key], fixture_dir)
    else:
        again = gguf_gen.write_model(tmp_path / "x.gguf", *key, seed=0)
        first = gguf_gen.model_path(*key, fixture_dir)
    assert first.read_bytes() == again.read_bytes()


@pytest.mark.parametrize("record", RECORDS, ids=str)
def test_format_file_loads_exactly_what_was_written(fixture_dir, record):
    f = load(gguf_gen.format_path(record.qtype, fixture_dir))
    written = gguf_gen.format_tensors(record.qtype, seed=0)
    assert sorted(f.tensors) == sorted(written)
    for name, (shape, raw) in written.items():
        t = f.tensors[name]
        assert (t.qtype, t.shape) == (int(record.qtype), shape), name
        assert np.array_equal(t.raw, raw), name
        ours = oq.dequantize(t.raw, t.qtype, t.shape)
        with np.errstate(all="ignore"):
            theirs = gguf.quants.dequantize(t.raw.reshape(-1, raw.size // max(1, int(np.prod(shape[:-1])))),
                                            gguf.GGMLQuantizationType(t.qtype))
        why = bit_mismatch(ours, np.asarray(theirs, np.float32).reshape(shape))
        assert why is None and np.isfinite(ours).all(), f"{name}: {why}"


@pytest.mark.parametrize("arch, wtype", MODELS)
def test_model_file_loads_with_expected_types(fixture_dir, arch, wtype):
    f = load(gguf_gen.model_path(arch, wtype, fixture_dir))
    weights = gguf_gen.model_tensors(arch, seed=0)
    assert sorted(f.tensors) == sorted(weights)
    assert f.kv["general.architecture"] == arch and len(f.kv["tokenizer.ggml.tokens"]) == 300
    for name, values in weights.items():
        t = f.tensors[name]
        assert t.qtype == gguf_gen.storage_type(values, wtype) and t.shape == values.shape, name


@pytest.mark.parametrize("arch, wtype", MODELS)
def test_llama_cpp_loads_tiny_model(fixture_dir, arch, wtype):
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama_cpp (llama-cpp-python) is not importable: pip install 'logitcheck[peers]'")
    path = gguf_gen.model_path(arch, wtype, fixture_dir)
    proc = subprocess.run([sys.executable, "-m", "fixtures.llama_probe", str(path)], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"llama.cpp failed on {path.name} (rc {proc.returncode}): {proc.stderr[-1500:]}"
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["n_vocab"] == 300 and out["shape"] == [5, 300], out
    assert out["finite"], f"llama.cpp returned non-finite logits for {path.name}: {out}"
    if arch == "gemma2":  # the final softcap bounds every logit by 30
        assert out["max_abs"] < 30.0, out


# ---- corrupt files: every one is a GGUFLoadError naming the file and the problem ----

CORRUPTIONS = {
    "wrong magic": "bad magic", "unsupported version": "unsupported GGUF version",
    "truncated header": "truncated header", "truncated tensor data": "truncated tensor data",
    "offset past the end": "past the end", "misaligned data": "misaligned",
    "unknown type": "unknown or unsupported tensor type", "duplicated name": "duplicate tensor name",
}
BASES = [("format", "Q8_0"), ("format", "Q4_K"), ("model", ("qwen3", "Q4_K"))]


def _u32(buf: bytearray, at: int, v: int) -> None:
    buf[at:at + 4] = int(v).to_bytes(4, "little")


def _u64(buf: bytearray, at: int, v: int) -> None:
    buf[at:at + 8] = int(v).to_bytes(8, "little")


def corrupt(data: bytes, kind: str, draw) -> bytes:
    """Apply corruption ``kind``; ``draw`` supplies hypothesis-chosen integers."""
    sizes = {int(t): v for t, v in gguf.GGML_QUANT_SIZES.items()}
    lay = walk(data, sizes)
    buf = bytearray(data)
    pool = lay.tensors
    if kind == "duplicated name":  # only names with a same-length twin can be copied over in place
        pool = [e for e in pool if any(o is not e and len(o.name) == len(e.name) for o in pool)]
    t = pool[draw(st.integers(0, len(pool) - 1), "tensor")]
    if kind == "wrong magic":
        buf[0:4] = draw(st.binary(min_size=4, max_size=4).filter(lambda b: b != b"GGUF"), "magic")
    elif kind == "unsupported version":
        _u32(buf, 4, draw(st.integers(0, 2**32 - 1).filter(lambda v: v not in (2, 3)), "version"))
    elif kind == "truncated header":
        buf = buf[:draw(st.integers(0, lay.header_end - 1), "cut")]
    elif kind == "truncated tensor data":
        end = max(lay.data_start + e.offset + _nbytes(e, sizes) for e in lay.tensors)
        buf = buf[:draw(st.integers(lay.data_start, end - 1), "cut")]
    elif kind == "offset past the end":
        past = len(data) - lay.data_start + lay.alignment * draw(st.integers(0, 2**20), "extra")
        _u64(buf, t.offset_at, -(-past // lay.alignment) * lay.alignment)
    elif kind == "misaligned data":
        _u64(buf, t.offset_at, t.offset + draw(st.integers(1, lay.alignment - 1), "skew"))
    elif kind == "unknown type":
        _u32(buf, t.type_at, draw(st.integers(0, 2**32 - 1).filter(lambda v: v not in sizes), "type"))
    else:  # duplicated name: copy another same-length name over this one
        twins = [e for e in lay.tensors if e is not t and len(e.name) == len(t.name)]
        other = twins[draw(st.integers(0, len(twins) - 1), "twin")]
        raw = other.name.encode()
        buf[t.name_at + 8:t.name_at + 8 + len(raw)] = raw
    return bytes(buf)


def _nbytes(e, sizes) -> int:
    block, size = sizes[e.type_id]
    return int(np.prod(e.dims, dtype=np.int64)) // block * size


@given(data=st.data())
def test_corrupt_file_is_one_clear_error(fixture_dir, tmp_path_factory, data):
    kind = data.draw(st.sampled_from(sorted(CORRUPTIONS)), label="corruption")
    which, key = data.draw(st.sampled_from(BASES), label="base")
    src = gguf_gen.format_path(oq.QType[key], fixture_dir) if which == "format" else gguf_gen.model_path(*key, fixture_dir)
    bad = corrupt(src.read_bytes(), kind, lambda s, label: data.draw(s, label=label))
    path = tmp_path_factory.mktemp("corrupt") / f"corrupt-{src.stem}.gguf"
    path.write_bytes(bad)
    with pytest.raises(GGUFLoadError) as err:
        load(path)
    msg = str(err.value)
    assert str(path) in msg and CORRUPTIONS[kind] in err.value.problem, f"{kind}: {msg}"


def test_missing_file_is_a_load_error(tmp_path):
    with pytest.raises(GGUFLoadError, match="cannot read"):
        load(tmp_path / "absent.gguf")


def test_q4_k_fixture_encoder_within_half_a_step():
    """The fixture Q4_K encoder's stated bound: |x - x^| <= step/2 + 2u·(15·step + offset)."""
    from fixtures.kquant_encode import encode_q4_k

    x = (np.random.default_rng(3).standard_normal((4, 512)) * 0.1).astype(np.float32)
    x[0, :32] = 0.0
    stored = encode_q4_k(x)
    back = oq.dequantize(stored, oq.QType.Q4_K, x.shape).reshape(-1, 8, 32).astype(np.float64)
    blocks = stored.reshape(-1, 144)
    d = blocks[:, 0:2].copy().view("<f2").astype(np.float64)
    dmin = blocks[:, 2:4].copy().view("<f2").astype(np.float64)
    from oracle.quants.kquants import k4_scale_min
    sc, m = k4_scale_min(blocks, 4)
    step, offset = d * sc, dmin * m
    allowed = step / 2 + 2 * U32 * (15 * step + offset)
    err = np.abs(back - x.reshape(-1, 8, 32)).max(axis=2)
    assert (err <= allowed).all(), float((err / allowed).max())
