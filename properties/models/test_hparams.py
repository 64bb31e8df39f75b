"""Hyperparameters the metadata leaves out, read as llama.cpp reads them.

Gemma 3n and Gemma 4 files may lack ``rope.freq_base_swa``, and may carry a linear
``rope.scaling`` meant for the global layers. The llama.cpp this project pins (llama-cpp-python
0.3.36) then rotates the sliding-window layers at base 10000 without scaling, as with the key
present (``oracle/models/architectures.py``: ``Arch.local_rope_base``); the other reading a port
might take, the global base and scale on every layer (what llama.cpp's generic loader assumes for
an architecture that sets no default of its own), is refuted against it at the first local layer.
"""
from __future__ import annotations

import dataclasses
import importlib.util
import subprocess
import sys
from pathlib import Path
from unittest import mock

import gguf
import numpy as np
import pytest

from fixtures import gguf_gen
from oracle.models import forward, load_model
from oracle.models.layers import compare
from properties.models import runs
from properties.models.error_model import envelope

ROOT = Path(__file__).resolve().parents[2]
ARCHS = ("gemma4", "gemma3n")
GLOBAL_BASE, SCALING = 1e6, 8.0  # the fixtures' global base; a linear factor for the global layers


def _variant(tmp_path: Path, arch: str) -> Path:
    """The tiny F32 fixture of ``arch`` written without ``rope.freq_base_swa`` and with linear rope
    scaling 8 (added next to the sliding window, which every Gemma fixture writes)."""
    sliding = gguf.GGUFWriter.add_sliding_window

    def with_scaling(w: gguf.GGUFWriter, n: int) -> None:
        sliding(w, n)
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(SCALING)

    path = tmp_path / f"{arch}-no-freq-base-swa.gguf"
    with mock.patch.object(gguf.GGUFWriter, "add_rope_freq_base_swa", lambda w, v: None), \
            mock.patch.object(gguf.GGUFWriter, "add_sliding_window", with_scaling):
        gguf_gen.write_model(path, arch, "F32")
    fields = gguf.GGUFReader(path).fields
    assert f"{arch}.rope.freq_base_swa" not in fields and f"{arch}.rope.scaling.factor" in fields
    return path


@pytest.mark.parametrize("arch", ARCHS)
def test_local_layers_default_to_base_10000_unscaled(tmp_path, arch):
    hp = load_model(_variant(tmp_path, arch)).hp
    local = [il for il in range(hp.n_layer) if hp.is_swa(il)]
    glob = [il for il in range(hp.n_layer) if not hp.is_swa(il)]
    assert local and glob
    assert all(hp.rope_of(il) == (10000.0, 1.0) for il in local)
    assert all(hp.rope_of(il) == (GLOBAL_BASE, 1.0 / SCALING) for il in glob)


@pytest.mark.peer
@pytest.mark.parametrize("arch", ARCHS)
def test_llama_cpp_reads_the_missing_key_as_the_oracle_does(tmp_path, arch):
    """llama.cpp on the variant: every tensor within the llama.cpp error model of the oracle's run;
    the oracle with the other reading (local layers at the global base and scale) leaves llama.cpp
    at the first local layer's rotated q, far past its bound."""
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama_cpp (llama-cpp-python) is not importable: pip install 'logitcheck[peers]'")
    path, out = _variant(tmp_path, arch), tmp_path / "llama.npz"
    proc = subprocess.run([sys.executable, "-m", "fixtures.llama_graph", str(path), "--tokens",
                           ",".join(map(str, runs.TOKENS)), "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"llama.cpp failed (rc {proc.returncode}): {proc.stderr[-1500:]}"
    with np.load(out) as z:
        live = {k: z[k] for k in z.files if z[k].dtype.kind == "f"}
    model = load_model(path)
    env = envelope(model, runs.TOKENS, "llama.cpp-cpu")
    rows, first = compare(env.exact.tensors, live, env.tensor_bounds())
    assert any(r.name == "l_out-0" for r in rows) and first is None, \
        f"{arch}: llama.cpp's {first.name} is {first.rel_err:.3g} from the oracle (bound {first.threshold:.3g})"

    model.hp = dataclasses.replace(model.hp, rope_base_swa=0.0)  # local layers rotate like the global ones
    other = forward(model, runs.TOKENS)
    _, first = compare(other.tensors, live, env.tensor_bounds())
    q0 = f"Qcur-{next(il for il in range(model.hp.n_layer) if model.hp.is_swa(il))}"
    assert first is not None and first.name == q0 and first.rel_err > 100 * first.threshold, first


# ---- per-layer head counts (Gemma 4 with num_global_key_value_heads): one definition read by both passes ----

def _kv(**over) -> dict:
    """A minimal gemma4 key table (5 layers) with ``over`` replacing keys below "gemma4."."""
    kv = {"general.architecture": "gemma4", "gemma4.embedding_length": 64, "gemma4.block_count": 5,
          "gemma4.attention.head_count": 4, "gemma4.attention.head_count_kv": 2, "gemma4.feed_forward_length": 256,
          "gemma4.attention.layer_norm_rms_epsilon": 1e-6, "gemma4.context_length": 256,
          "gemma4.attention.key_length": 32}
    return kv | {f"gemma4.{k.replace('__', '.')}": v for k, v in over.items()}


def test_per_layer_head_counts_are_read_layer_by_layer():
    """Arrays for head_count / head_count_kv give each layer its own counts in the oracle and in
    gpu_impl's config (the crash of the first parity round: a TypeError on the array); a scalar
    head_count_kv beside an array head_count applies to every layer; a missing head_count_kv is
    head_count layer by layer, as llama.cpp reads it."""
    from gpu_impl.models.checkpoint import _config
    from oracle.models.architectures import hparams

    hp = hparams(_kv(attention__head_count=[4, 4, 2, 4, 2], attention__head_count_kv=[2, 2, 1, 2, 1]), 300)
    assert [hp.n_head_of(i) for i in range(5)] == [4, 4, 2, 4, 2]
    assert [hp.n_head_kv_of(i) for i in range(5)] == [2, 2, 1, 2, 1]
    cfg = _config(_kv(attention__head_count=[4, 4, 2, 4, 2], attention__head_count_kv=[2, 2, 1, 2, 1]), 300)
    assert [cfg.heads_at(i) for i in range(5)] == [4, 4, 2, 4, 2] and [cfg.kv_heads_at(i) for i in range(5)] == [2, 2, 1, 2, 1]
    hp = hparams(_kv(attention__head_count_kv=[2, 2, 1, 2, 1]), 300)
    assert [hp.n_head_of(i) for i in range(5)] == [4] * 5 and hp.n_head_kv_of(2) == 1
    kv = _kv(attention__head_count=[4, 4, 2, 4, 2])
    del kv["gemma4.attention.head_count_kv"]
    hp, cfg = hparams(kv, 300), _config(kv, 300)
    assert [hp.n_head_kv_of(i) for i in range(5)] == [4, 4, 2, 4, 2] == [cfg.kv_heads_at(i) for i in range(5)]


@pytest.mark.parametrize("over, message", [
    ({"attention__head_count_kv": [2, 2, 1]}, "head_count_kv has 3 entries for 5 layers"),
    ({"attention__head_count_kv": [2, 2, 3, 2, 2]}, "layer 2: head_count=4 is not a multiple of head_count_kv=3"),
    ({"attention__head_count": [4, 4, 2, 4, 2], "attention__head_count_kv": 4},
     "layer 2: head_count=2 is not a multiple of head_count_kv=4"),
])
def test_bad_per_layer_head_counts_are_one_clear_error(over, message):
    from gpu_impl.models.checkpoint import _config
    from oracle.models.architectures import hparams

    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        hparams(_kv(**over), 300)
    with pytest.raises(ValueError):
        _config(_kv(**over), 300)


def test_the_kv_heads_fixture_has_fewer_kv_heads_on_its_global_layers():
    """The layout fixture with llama.cpp goldens (test_golden_parity.py) really has the arrays."""
    hp = runs.model("gemma4_kv_heads", "F32").hp
    assert hp.kv_heads == gguf_gen.GEMMA4_KV_HEADS and hp.heads == gguf_gen.GEMMA4_Q_HEADS
    assert {hp.n_head_kv_of(i) for i in range(hp.n_layer) if not hp.is_swa(i)} == {1}


def test_gemma3_without_window_reads_its_final_cap():
    """A gemma3 file with no sliding window and a final softcap (the converter writes it for a
    sliding-window pattern of 1): every layer global and the cap read, as llama.cpp's graph caps
    (its golden: test_golden_parity.py); the base gemma3 fixture, which has no cap key, stays uncapped."""
    hp = runs.model("gemma3_final_cap", "F32").hp
    assert hp.final_softcap == gguf_gen.GEMMA3_FINAL_CAP and not any(hp.is_swa(i) for i in range(hp.n_layer))
    assert runs.model("gemma3", "F32").hp.final_softcap == 0.0
