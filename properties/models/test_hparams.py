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
