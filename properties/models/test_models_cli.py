"""``logitcheck forward / parity / layers`` end to end on a generated fixture, and the
llama-perplexity KL-divergence base file as a parity reference."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from fixtures import goldens
from oracle.models.parity import compare, log_softmax
from properties.models import runs
from reports import kld_base
from reports.cli import main as cli

TOKS = ",".join(map(str, runs.TOKENS))


@pytest.fixture(scope="module")
def outs(tmp_path_factory):
    d = tmp_path_factory.mktemp("cli")
    for arch, wtype in (("llama", "F32"), ("llama", "Q4_K")):
        out = d / f"oracle-{wtype}.npz"
        assert cli(["forward", str(runs.path(arch, wtype)), "--tokens", TOKS, "--out", str(out)]) == 0
    assert cli(["forward", str(runs.path("llama", "F32")), "--tokens", TOKS, "--engine", "gpu_impl",
                "--dtype", "float16", "--chunk", "5", "--out", str(d / "gpu16.npz")]) == 0
    return d


def test_forward_writes_logits_tokens_and_layers(outs):
    with np.load(outs / "oracle-F32.npz") as z:
        assert z["logits"].shape == (len(runs.TOKENS), 300) and z["tokens"].tolist() == runs.TOKENS
        assert {"attn_norm-0", "kqv_out-1", "l_out-1", "result_norm"} <= set(z.files)
        assert np.array_equal(z["logits"], runs.env("llama", "F32", "gpu_impl-float32").exact.logits)


@pytest.mark.peer
def test_forward_llama_cpp_engine_reproduces_golden(outs):
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama_cpp (llama-cpp-python) is not importable")
    out = outs / "llama.npz"
    model = str(runs.path("llama", "F32"))
    assert cli(["forward", model, "--tokens", TOKS, "--engine", "llama.cpp", "--out", str(out)]) == 0
    with np.load(out) as z:
        bound = 2 * runs.env("llama", "F32", "llama.cpp-cpu").bound
        assert np.abs(z["logits"] - goldens.load("llama", "F32")["logits"]).max() <= bound
        assert "l_out-1" in z.files and "llama-cpp-python" in str(z["version"])


def test_parity_gate(outs, capsys):
    ref, q = str(outs / "oracle-F32.npz"), str(outs / "oracle-Q4_K.npz")
    assert cli(["parity", ref, ref, "--max-kld", "0", "--min-top1", "1"]) == 0
    kl = compare(np.load(ref)["logits"], np.load(q)["logits"]).kld.mean()
    capsys.readouterr()
    assert cli(["parity", ref, q, "--max-kld", f"{kl / 2:g}"]) == 1
    assert "GATE FAILED: mean KLD" in capsys.readouterr().out
    assert cli(["parity", ref, q, "--max-kld", f"{kl * 2:g}", "--min-top1", "0.5", "--json", str(outs / "p.json")]) == 0
    out = capsys.readouterr().out
    assert "Mean    KLD:" in out and "Same top p:" in out and "top-10 overlap" in out and (outs / "p.json").exists()


def test_parity_reads_a_kl_divergence_base_file(outs, tmp_path, capsys):
    """A base file written from the golden reproduces the npz-to-npz KL within the 16-bit
    quantization of its log-probabilities: each log p is off by at most scale/2 <= 16/65535/2, so
    KL moves by <= δ·(1 + max|log p - log q|), plus the mass below the -16 floor."""
    gold = goldens.load("llama", "F32")["logits"]
    base = tmp_path / "base.kld"
    kld_base.write(base, gold, np.asarray(runs.TOKENS), n_ctx=12)
    read = kld_base.read(base)
    assert read.n_chunk == 2 and read.logprobs.shape == (2 * 5, 300)
    exact = log_softmax(gold[read.rows()])
    live = read.logprobs > kld_base.FLOOR
    assert np.abs(read.logprobs - exact)[live].max() <= 16 / 65535 / 2 + 1e-6
    test = np.load(outs / "oracle-Q4_K.npz")["logits"]
    capsys.readouterr()
    assert cli(["parity", str(base), str(outs / "oracle-Q4_K.npz"), "--json", str(tmp_path / "s.json")]) == 0
    import json
    s = json.loads((tmp_path / "s.json").read_text())
    direct = compare(gold[read.rows()], test[read.rows()], read.next_tokens())
    lq = log_softmax(test[read.rows()])
    delta = 16 / 65535 / 2
    allow = delta * (1 + np.abs(exact - lq).max()) + 300 * np.exp(-16) * (16 + np.abs(lq).max())
    assert abs(s["mean_kld"] - direct.kld.mean()) <= allow
    assert s["same_top1"] == direct.same_top1.mean() and s["dp_token"].startswith("next token")


def test_layers_reports_no_divergence_for_float16_engine(outs, capsys):
    model = str(runs.path("llama", "F32"))
    rc = cli(["layers", str(outs / "oracle-F32.npz"), str(outs / "gpu16.npz"), "--model", model])
    out = capsys.readouterr().out
    assert rc == 0 and "no tensor beyond relative error 0.01" in out and "norm weights blk.1.ffn_norm.weight" in out


@pytest.mark.parametrize("argv, message", [
    (["forward", "MISSING.gguf", "--tokens", "1,2", "--out", "x.npz"], "not a readable GGUF"),
    (["forward", "MODEL", "--tokens", "1,300", "--out", "x.npz"], "outside the vocabulary"),
    (["forward", "MODEL", "--tokens", "1,a", "--out", "x.npz"], "comma-separated integers"),
    (["forward", "MODEL", "--tokens", "1,2", "--engine", "gpu_impl", "--chunk", "0", "--out", "x.npz"],
     "chunk must be"),
    (["parity", "MODEL", "MODEL"], "logits"),
    (["layers", "A.npz", "A.npz", "--error-model", "gpu_impl-float32"], "needs --model"),
])
def test_bad_input_is_one_clear_error(tmp_path, capsys, argv, message):
    np.savez(tmp_path / "A.npz", logits=np.zeros((2, 3)), tokens=np.arange(2))
    argv = [str(runs.path("llama", "F32")) if a == "MODEL" else (str(tmp_path / a) if a.endswith("npz") else a)
            for a in argv]
    assert cli(argv) == 2
    assert message in capsys.readouterr().err


def test_parity_flags_a_misleading_cosine(tmp_path, capsys):
    """Logits sharing a large offset have cosine ~1 whatever their top tokens; parity says so."""
    rng = np.random.default_rng(7)
    base = 50.0 + rng.standard_normal((16, 300))
    ref, test = base.copy(), base.copy()
    for row in test:  # the top-5 tokens sink to the bottom: a different distribution, cosine still ~1
        top = np.argsort(row)[-5:]
        row[top] -= 8.0
    np.save(tmp_path / "ref.npy", ref)
    np.save(tmp_path / "test.npy", test)
    assert cli(["parity", str(tmp_path / "ref.npy"), str(tmp_path / "test.npy")]) == 0
    out = capsys.readouterr().out
    assert "WARNING: cosine" in out and "reference's top-1 token" in out


def test_bfloat16_engine_judged_and_its_precision_named(tmp_path, capsys):
    """`forward --engine gpu_impl --dtype bfloat16` on the BF16 gemma3 fixture, then `layers
    --error-model gpu_impl-bfloat16 --explain-precision`: within the float64 bound and the matched
    bfloat16 reference (exit 0), and named a bfloat16 engine (the first parity round, without a
    bfloat16 model, called a correct bf16 port "structural" at `embd`)."""
    model = runs.path("gemma3", "BF16")
    ref, test = tmp_path / "ref.npz", tmp_path / "bf16.npz"
    assert cli(["forward", str(model), "--tokens", TOKS, "--out", str(ref)]) == 0
    assert cli(["forward", str(model), "--tokens", TOKS, "--engine", "gpu_impl", "--dtype", "bfloat16",
                "--chunk", "8", "--out", str(test)]) == 0
    capsys.readouterr()
    rc = cli(["layers", str(ref), str(test), "--model", str(model), "--error-model", "gpu_impl-bfloat16",
              "--explain-precision"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "verdict: within the gpu_impl-bfloat16 error model of this engine at every tensor" in out, out
    assert "within the matched bfloat16 reference's residual at every tensor" in out, out
    assert "precision: consistent with a bfloat16 engine" in out, out
