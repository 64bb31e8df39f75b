"""Bad input to the forward passes: one clear ValueError naming the problem, never a crash, a hang
or a silent wrong answer; the same call twice gives the same result."""
from __future__ import annotations

from pathlib import Path

import gguf
import numpy as np
import pytest

import gpu_impl.models as gm
from fixtures import gguf_gen
from oracle.models import State, forward, load_model
from properties.models import runs


def _not_a_model(tmp_path: Path, kind: str) -> Path:
    p = tmp_path / f"{kind}.gguf"
    if kind == "garbage":
        p.write_bytes(b"definitely not GGUF" * 10)
    else:  # a valid GGUF of an architecture the passes do not know
        def fill(w: gguf.GGUFWriter) -> None:
            w.add_tensor("token_embd.weight", np.zeros((4, 8), np.float32))
        gguf_gen.write_atomically(p, "mamba", fill)
    return p


@pytest.mark.parametrize("kind, problem", [("garbage", "GGUF"), ("mamba", "mamba")])
def test_unloadable_model(tmp_path, kind, problem):
    path = _not_a_model(tmp_path, kind)
    with pytest.raises(ValueError, match=problem):
        load_model(path)
    with pytest.raises(ValueError, match=problem):
        gm.Checkpoint(path)


@pytest.mark.parametrize("tokens, problem", [([1, 300], "outside the vocabulary|must lie in"), ([], "non-empty|empty"),
                                             ([-1, 2], "outside the vocabulary|must lie in"),
                                             (np.array([1.0, 2.0]), "integer|must lie in")])
def test_bad_tokens(tokens, problem):
    with pytest.raises(ValueError, match=problem):
        forward(runs.model("qwen3", "Q8_0"), tokens)
    with pytest.raises(ValueError, match=problem):
        gm.run(runs.path("qwen3", "Q8_0"), tokens)


def test_kv_cache_overflow_is_refused():
    m = runs.model("llama", "F32")
    state = State(m, capacity=4)
    forward(m, [1, 2, 3], state=state)
    with pytest.raises(ValueError, match="does not fit the KV cache"):
        forward(m, [4, 5], state=state)
    dec = gm.Decoder(gm.Checkpoint(runs.path("llama", "F32")), capacity=4)
    dec([1, 2, 3])
    with pytest.raises(ValueError, match="KV cache full"):
        dec([4, 5])


def test_bad_engine_settings():
    with pytest.raises(ValueError, match="dtype"):
        gm.Checkpoint(runs.path("llama", "F32"), dtype="float8")
    with pytest.raises(ValueError, match="chunk"):
        gm.run(runs.path("llama", "F32"), [1, 2], chunk=0)


def test_missing_tensor_is_named(tmp_path):
    weights = gguf_gen.model_tensors("llama", 0)
    del weights["blk.1.ffn_down.weight"]

    def fill(w: gguf.GGUFWriter) -> None:
        gguf_gen.add_geometry(w, gguf_gen.HIDDEN, 2, gguf_gen.N_FF, gguf_gen.N_HEAD, gguf_gen.N_KV, n_ctx=64)
        for name, v in weights.items():
            w.add_tensor(name, v)
    path = gguf_gen.write_atomically(tmp_path / "holey.gguf", "llama", fill)
    with pytest.raises(ValueError, match="blk.1.ffn_down.weight"):
        forward(load_model(path), [1, 2])
    with pytest.raises(ValueError, match="blk.1.ffn_down.weight"):
        gm.run(path, [1, 2])


def test_same_input_same_result():
    a = gm.run(runs.path("gemma2", "Q4_K"), runs.TOKENS, chunk=5)
    b = gm.run(runs.path("gemma2", "Q4_K"), runs.TOKENS, chunk=5)
    assert np.array_equal(a["logits"], b["logits"])
