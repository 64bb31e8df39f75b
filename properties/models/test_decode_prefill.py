"""Incremental decoding through the KV cache equals a full prefill, at every position: for the
oracle, for gpu_impl and for the real llama.cpp (fed token by token with llama_decode). The live
llama.cpp prefill is also held to the oracle at every tensor its graph names (the goldens keep
only the residual stream): each within the llama.cpp error model's bound.

Bounds: the oracle computes both ways in float64, so they may differ by float64 roundings: the
float32 engine's envelope scaled by 2^-53 / 2^-24. An engine's prefill and its decode are each
within its bound of the oracle, so they may differ by twice that bound. The live llama.cpp run
is also held to its golden (the same build must reproduce it within the same 2× bound; a
different build says so in the failure).
"""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import gpu_impl.models as gm
from fixtures import gguf_gen, goldens
from oracle.models import forward, stepwise
from oracle.models.layers import compare
from properties.models import runs
from properties.models.replay import replay

ROOT = Path(__file__).resolve().parents[2]
F64_OVER_F32 = 2.0**-53 / 2.0**-24
LIVE = [(a, w) for a in gguf_gen.ARCHS for w in ("F32", "Q8_0")]


@pytest.mark.parametrize("arch", gguf_gen.ARCHS)
@pytest.mark.parametrize("chunk", [1, 7])
def test_oracle_decode_equals_prefill(arch, chunk):
    m = runs.model(arch, "F32")
    full, steps = forward(m, runs.TOKENS), stepwise(m, runs.TOKENS, chunk)
    bound = runs.env(arch, "F32", "gpu_impl-float32").bound * F64_OVER_F32
    assert np.abs(full.logits - steps.logits).max() <= bound
    assert np.array_equal(steps.positions, np.arange(len(runs.TOKENS)))


# F32 and each family's most quantized fixture in float32; its 16-bit fixture in float16
GPU_CASES = [(a, w, "float32") for a in gguf_gen.ARCHS for w in ("F32", gguf_gen.wtypes(a)[-1])] + \
    [(a, gguf_gen.wtypes(a)[1], "float16") for a in gguf_gen.ARCHS]


@pytest.mark.parametrize("arch, wtype, dtype", GPU_CASES)
def test_gpu_impl_decode_equals_prefill(arch, wtype, dtype):
    bound = 2 * runs.env(arch, wtype, f"gpu_impl-{dtype}").bound
    ckpt = gm.Checkpoint(runs.path(arch, wtype), dtype)
    full = gm.run(ckpt, runs.TOKENS)["logits"]
    for chunk in (1, 5):
        steps = gm.run(ckpt, runs.TOKENS, chunk=chunk)["logits"]
        worst = np.abs(full - steps).max(axis=1)
        at = int(np.argmax(worst > bound))
        assert worst.max() <= bound, (f"{arch}-{wtype} {dtype} chunk {chunk}: decode differs from prefill by "
                                      f"{worst.max():.3g} > {bound:.3g}, first at position {at}")


@pytest.fixture(scope="module")
def llama_runs(tmp_path_factory) -> Path:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama_cpp (llama-cpp-python) is not importable: pip install 'logitcheck[peers]'")
    out = tmp_path_factory.mktemp("llama-runs")
    models = [str(runs.path(a, w)) for a, w in LIVE]
    proc = subprocess.run([sys.executable, "-m", "fixtures.llama_graph", *models, "--tokens",
                           ",".join(map(str, runs.TOKENS)), "--chunks", "0,1", "--out-dir", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, f"llama.cpp runs failed (rc {proc.returncode}): {proc.stderr[-1500:]}"
    return out


@pytest.mark.peer
@pytest.mark.parametrize("arch, wtype", LIVE)
def test_llama_cpp_decode_equals_prefill_and_golden(llama_runs, arch, wtype):
    stem = runs.path(arch, wtype).stem
    with np.load(llama_runs / f"{stem}-c0.npz") as a, np.load(llama_runs / f"{stem}-c1.npz") as b:
        full, steps, version = a["logits"], b["logits"], str(a["version"])
    bound = 2 * runs.env(arch, wtype, "llama.cpp-cpu").bound
    worst = np.abs(full - steps).max(axis=1)
    assert worst.max() <= bound, (f"{arch}-{wtype}: llama.cpp's token-by-token decode differs from its prefill by "
                                  f"{worst.max():.3g} > {bound:.3g}, first at position {int(np.argmax(worst > bound))}")
    gold = goldens.load(arch, wtype)["logits"]
    built = goldens.manifest()["llama_cpp"]
    off = np.abs(full - gold).max()
    assert off <= bound, (f"{arch}-{wtype}: live llama.cpp ({version}) is {off:.3g} from the golden computed with "
                          f"{built} (bound {bound:.3g}); if llama.cpp changed, regenerate: {goldens.COMMAND}")
    runs.note(f"{arch}-{wtype}", "llama.cpp live", {"decode_vs_prefill": float(worst.max()),
                                                    "live_vs_golden": float(off), "bound": bound})


@pytest.mark.peer
@pytest.mark.parametrize("arch, wtype", LIVE)
def test_llama_cpp_every_tensor_within_error_model(llama_runs, arch, wtype):
    e = runs.env(arch, wtype, "llama.cpp-cpu")
    with np.load(llama_runs / f"{runs.path(arch, wtype).stem}-c0.npz") as z:
        live = {k: z[k] for k in z.files}
    rows, first = compare(e.exact.tensors, live, e.tensor_bounds())
    seen = {r.name for r in rows}
    missing = [k for k in e.exact.tensors if k.startswith(("attn_norm-", "kqv_out-", "l_out-")) and k not in seen]
    assert not missing, f"{arch}-{wtype}: llama.cpp's dump lacks {missing} (its graph names changed?)"
    assert first is None, (f"{arch}-{wtype}: llama.cpp's {first.name} is {first.rel_err:.3g} from the oracle "
                           f"(bound {first.threshold:.3g})")
    worst = max((r for r in rows if r.threshold > 0), key=lambda r: r.rel_err / r.threshold)
    runs.note(f"{arch}-{wtype}", "llama.cpp tensors", {"tensors": len(rows), "worst": worst.name,
                                                        "worst_over_bound": worst.rel_err / worst.threshold})


@pytest.mark.peer
@pytest.mark.parametrize("arch, wtype", LIVE)
def test_llama_cpp_every_tensor_within_local_replay(llama_runs, arch, wtype):
    """Each tensor of llama.cpp's dump recomputed by the oracle from llama.cpp's own dumped inputs
    (properties/models/replay.py) is within the llama.cpp-cpu model's local bound: the replay's
    one-op brackets and local Monte Carlo hold on the real engine (worst ×0.54, gemma2 Q8_0's fp16
    GELU table at ffn_geglu-1, measured 2026-11-27)."""
    with np.load(llama_runs / f"{runs.path(arch, wtype).stem}-c0.npz") as z:
        live = {k: z[k] for k in z.files}
    r = replay(runs.model(arch, wtype), runs.TOKENS, live, "llama.cpp-cpu")
    assert len(r.rows) >= 29, f"{arch}-{wtype}: only {len(r.rows)} tensors replayed"
    first = r.first()
    assert first is None, f"{arch}-{wtype}: llama.cpp's {first.line()}"
    worst = r.worst()
    runs.note(f"{arch}-{wtype}", "llama.cpp local replay", {"tensors": len(r.rows), "worst": worst.name,
                                                             "worst_over_bound": worst.ratio})
