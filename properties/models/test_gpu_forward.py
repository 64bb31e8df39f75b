"""gpu_impl's whole-model forward pass against the float64 oracle, within the error model of a
float32 engine (every fixture) and of a float16 one (weights and activations in fp16; one F16
fixture per family, BF16 for Gemma 3/4: the weight type only changes which decoder gpu_impl.quants uses, and those
are judged bit-exact by the quant properties).

Checked: max |Δlogit| and per-position KL under their bounds, the same top-1 wherever the
margin forbids a change, and every named intermediate within its own bound (so no tensor is
off even where the logits happen to agree). Hypothesis then draws sequences, lengths and how
they are fed (all at once or chunk by chunk through the KV cache).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import gpu_impl.models as gm
from fixtures import gguf_gen, goldens
from oracle.models import forward
from oracle.models.parity import compare
from properties.models import runs
from properties.models.checks import judge
from properties.models.error_model import envelope
from properties.profiles import current_profile

# the float16 engine on each family's 16-bit fixture (F16, or BF16 for the Gemma 3/4 ones)
CASES = [(a, w, "float32") for a, w in runs.MODELS] + [(a, gguf_gen.wtypes(a)[1], "float16") for a in (*gguf_gen.ARCHS, *gguf_gen.LAYOUTS)]
_DRAWS = settings(max_examples=60 if current_profile() == "nightly" else 6, deadline=None)


@pytest.mark.parametrize("arch, wtype, dtype", CASES, ids=lambda v: str(v))
def test_gpu_impl_forward_within_error_model(arch, wtype, dtype):
    env = runs.env(arch, wtype, f"gpu_impl-{dtype}")
    out = gm.run(runs.path(arch, wtype), runs.TOKENS, dtype=dtype)
    stats = judge(f"{arch}-{wtype} {dtype}", env, out["logits"], out["tensors"])
    runs.note(f"{arch}-{wtype}", f"gpu_impl {dtype} vs oracle", stats)


@pytest.mark.peer
@pytest.mark.parametrize("arch, wtype, dtype", CASES, ids=lambda v: str(v))
def test_gpu_impl_forward_against_llama_cpp_golden(arch, wtype, dtype):
    """Both engines are within their own bound of the oracle, so they are within the sum of the
    two bounds of each other."""
    gold = goldens.load(arch, wtype)["logits"]
    out = gm.run(runs.path(arch, wtype), runs.TOKENS, dtype=dtype)["logits"]
    bound = runs.env(arch, wtype, f"gpu_impl-{dtype}").bound + runs.env(arch, wtype, "llama.cpp-cpu").bound
    diff = float(np.abs(out - gold).max())
    par = compare(gold, out, runs.TOKENS[1:])
    runs.note(f"{arch}-{wtype}", f"gpu_impl {dtype} vs llama.cpp", {
        "mean_kld": float(par.kld.mean()), "max_kld": float(par.kld.max()), "same_top1": float(par.same_top1.mean()),
        "max_abs_dlogit": diff, "dlogit_bound": bound})
    assert diff <= bound, f"{arch}-{wtype} {dtype}: gpu_impl is {diff:.3g} from llama.cpp > {bound:.3g}"


@_DRAWS
@given(case=st.sampled_from(CASES), n=st.integers(1, 40), seed=st.integers(0, 2**16),
       chunk=st.one_of(st.none(), st.integers(1, 12)))
def test_gpu_impl_forward_drawn(case, n, seed, chunk):
    arch, wtype, dtype = case
    toks = np.random.default_rng(seed).integers(0, 300, n)
    env = envelope(runs.model(arch, wtype), toks, f"gpu_impl-{dtype}", runs=3, seed=seed)
    out = gm.run(runs.path(arch, wtype), toks, dtype=dtype, chunk=chunk)
    judge(f"{arch}-{wtype} {dtype} n={n} chunk={chunk}", env, out["logits"], out["tensors"])


def test_oracle_passes_are_deterministic():
    """Same model, same tokens: bit-identical logits and tensors (no state leaks between runs)."""
    m = runs.model("gemma2", "Q8_0")
    a, b = forward(m, runs.TOKENS), forward(m, runs.TOKENS)
    assert np.array_equal(a.logits, b.logits)
    assert all(np.array_equal(a.tensors[k], b.tensors[k]) for k in a.tensors)


HALF = [(a, gguf_gen.wtypes(a)[0], d) for a in (*gguf_gen.ARCHS, *gguf_gen.LAYOUTS) for d in ("float16", "bfloat16")]


@pytest.mark.parametrize("arch, wtype, dtype", HALF, ids=lambda v: str(v))
def test_gpu_impl_half_precision_within_the_full_verdict(arch, wtype, dtype):
    """gpu_impl storing in float16 / bfloat16, judged as ``logitcheck layers --error-model
    gpu_impl-<dtype>`` judges it: the float64 bound, the matched reference with gpu_impl's own
    stores (``Engine.fused``) and the local replay from its dumped inputs, on every fixture's
    float32 file: within at every tensor (a replay that stores a value gpu_impl keeps in float32,
    as Gemma 3n's gate cutoff once was, fails here)."""
    from properties.models import matched as M, verdict as V
    from properties.models.error_model import ENGINES

    engine = f"gpu_impl-{dtype}"
    env = runs.env(arch, wtype, engine)
    tensors = gm.run(runs.path(arch, wtype), runs.TOKENS, dtype=dtype)["tensors"]
    ref = M.matched(runs.model(arch, wtype), runs.TOKENS, dtype, fused=ENGINES[engine].fused)
    v = V.judge_run(env, engine, runs.model(arch, wtype), tensors, ref)
    assert not v.structural, v.line()
