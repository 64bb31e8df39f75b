"""Runs from any engine: `logitcheck parity / layers` read a folder of .npy files or raw float32
files with a shapes list, named by llama.cpp's graph names or HF-style module names, exactly as
they read `logitcheck forward`'s .npz; bad input is one clear error (exit 2), never a crash. The
C and Rust writers in examples/dumps are compiled, run, and their folders judged."""
from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from fixtures import llama_graph
from oracle.models import ARCHS, forward
from oracle.models.names import HF_NAMES, is_graph_name, table, to_graph_name
from properties.models import runs
from reports.cli import main as cli
from reports.dumps import read_run

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "dumps"
TOKS = ",".join(map(str, runs.TOKENS))


@pytest.fixture(scope="module")
def oracle_npz(tmp_path_factory):
    out = tmp_path_factory.mktemp("dumps") / "oracle.npz"
    assert cli(["forward", str(runs.path("gemma2", "Q8_0")), "--tokens", TOKS, "--out", str(out)]) == 0
    return out


def _hf(graph: str, arch: str) -> str | None:
    """The HF-style name of one llama.cpp name, from the map (None: no module returns it)."""
    op, _, layer = graph.partition("-")
    pat = HF_NAMES[arch].get(op)
    return None if pat is None else pat.replace("{i}", layer)


def _write_npy_folder(d: Path, tensors: dict[str, np.ndarray], tokens: np.ndarray) -> Path:
    d.mkdir()
    for name, v in tensors.items():
        np.save(d / f"{name}.npy", v)
    np.save(d / "tokens.npy", tokens)
    return d


def _write_raw_folder(d: Path, tensors: dict[str, np.ndarray], tokens: np.ndarray, suffix: str = ".f32") -> Path:
    d.mkdir()
    lines = []
    for name, v in tensors.items():
        np.ascontiguousarray(v, "<f4").tofile(d / f"{name}{suffix}")
        lines.append(" ".join([name, *map(str, v.shape)]))
    (d / "shapes.txt").write_text("# written by a test\n" + "\n".join(lines) + "\n")
    (d / "tokens.txt").write_text(", ".join(map(str, tokens.tolist())))
    return d


def _layers(capsys, *argv: str) -> tuple[int, str]:
    capsys.readouterr()
    rc = cli(["layers", *argv])
    cap = capsys.readouterr()
    return rc, cap.out + cap.err


def test_folders_read_as_the_npz_they_were_written_from(oracle_npz, tmp_path, capsys):
    """Every layout and naming reads back to the same tensors, and `layers` against the .npz prints
    the table it prints for the .npz itself: zero error everywhere (the float32 copy of a float64
    run is compared with the float32 copy)."""
    run = read_run(oracle_npz)
    f32 = {k: v.astype(np.float32) for k, v in run.tensors.items()}
    ref = tmp_path / "ref32.npz"
    np.savez(ref, tokens=run.tokens, **{("logits" if k == "result_output" else k): v for k, v in f32.items()})
    hf = {(_hf(k, "gemma2") or k): v for k, v in f32.items()}
    assert sum(k != h for k, h in zip(f32, hf)) >= 8  # the HF-style folder really uses HF names
    folders = [_write_npy_folder(tmp_path / "npy", f32, run.tokens),
               _write_raw_folder(tmp_path / "raw", f32, run.tokens),
               _write_npy_folder(tmp_path / "npy-hf", hf, run.tokens),
               _write_raw_folder(tmp_path / "raw-hf", hf, run.tokens, ".bin")]
    rc, want = _layers(capsys, str(ref), str(ref))
    assert rc == 0 and "l_out-1" in want and "result_output" in want
    for d in folders:
        back = read_run(d, "gemma2")
        assert back.tensors.keys() == f32.keys() and np.array_equal(back.tokens, run.tokens)
        assert all(np.array_equal(back.tensors[k], f32[k]) for k in f32)
        rc, out = _layers(capsys, str(ref), str(d), "--model", str(runs.path("gemma2", "Q8_0")))
        assert rc == 0 and out.splitlines()[:len(f32) + 1] == want.splitlines()[:len(f32) + 1], d
    capsys.readouterr()
    gate = ["--arch", "gemma2", "--max-kld", "0", "--min-top1", "1"]
    assert cli(["parity", str(ref), str(tmp_path / "raw-hf"), *gate]) == 0


def test_a_folder_locates_a_divergence(oracle_npz, tmp_path, capsys):
    """A dump whose layer-1 MLP output is off is located there, under either naming."""
    run = read_run(oracle_npz)
    bad = dict(run.tensors)
    bad["ffn_out-1"] = bad["ffn_out-1"] * 1.5
    bad["l_out-1"] = bad["l_out-1"] + 0.5 * run.tensors["ffn_out-1"]
    d = _write_npy_folder(tmp_path / "bad", {(_hf(k, "gemma2") or k): v for k, v in bad.items()}, run.tokens)
    rc, out = _layers(capsys, str(oracle_npz), str(d), "--arch", "gemma2")
    assert rc == 1 and "first divergence at layer 1, ffn_out-1 (down projection)" in out


def test_error_model_reads_the_tokens_of_a_folder(oracle_npz, tmp_path, capsys):
    """`layers --error-model` against a folder REF (HF-style names, tokens.txt): gpu_impl's float32
    run of the same tokens is within its bounds; without token ids the command says what is missing."""
    model = str(runs.path("gemma2", "Q8_0"))
    run = read_run(oracle_npz)
    ref = _write_raw_folder(tmp_path / "ref", {(_hf(k, "gemma2") or k): v for k, v in run.tensors.items()}, run.tokens)
    gpu = tmp_path / "gpu32.npz"
    assert cli(["forward", model, "--tokens", TOKS, "--engine", "gpu_impl", "--out", str(gpu)]) == 0
    rc, out = _layers(capsys, str(ref), str(gpu), "--model", model, "--error-model", "gpu_impl-float32")
    assert rc == 0 and "no tensor beyond the gpu_impl-float32 error model's bounds" in out, out
    (ref / "tokens.txt").unlink()
    rc, out = _layers(capsys, str(ref), str(gpu), "--model", model, "--error-model", "gpu_impl-float32")
    assert rc == 2 and "no token ids" in out


def _bad_folder(tmp_path: Path, case: str) -> Path:
    d = tmp_path / case
    d.mkdir()
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    if case == "wrong size":
        x.tofile(d / "l_out-0.f32")
        (d / "shapes.txt").write_text("l_out-0 3 5\n")
    elif case == "unknown name":
        np.save(d / "l_out_0.npy", x)
    elif case == "per-layer op without layer":
        np.save(d / "l_out.npy", x)
    elif case == "unlisted raw file":
        x.tofile(d / "l_out-0.f32")
    elif case == "bad shapes line":
        x.tofile(d / "l_out-0.f32")
        (d / "shapes.txt").write_text("l_out-0 3 x4\n")
    elif case == "listed, no file":
        (d / "shapes.txt").write_text("l_out-0 3 4\n")
    elif case == "integer tensor":
        np.save(d / "l_out-0.npy", x.astype(np.int32))
    elif case == "one tensor twice":
        np.save(d / "l_out-0.npy", x)
        np.save(d / "model.layers.0.npy", x)
    elif case == "ambiguous HF name":
        np.save(d / "model.layers.0.post_attention_layernorm.npy", x)
    elif case == "not a npy":
        (d / "l_out-0.npy").write_bytes(b"not numpy")
    elif case == "empty":
        pass
    return d


@pytest.mark.parametrize("case, message", [
    ("wrong size", "48 bytes, but shape 3 x 5 in shapes.txt needs 60"),
    ("unknown name", "unknown tensor name 'l_out_0'"),
    ("per-layer op without layer", "unknown tensor name 'l_out'"),
    ("unlisted raw file", "l_out-0.f32 not listed in shapes.txt"),
    ("bad shapes line", "line 1: want 'NAME d0 d1 ...'"),
    ("listed, no file", "needs exactly one file l_out-0.f32 or l_out-0.bin"),
    ("integer tensor", "int32 values, not floating point"),
    ("one tensor twice", "are the same tensor (l_out-0)"),
    ("ambiguous HF name", "give the architecture"),
    ("not a npy", "not a readable .npy file"),
    ("empty", "no tensors"),
])
def test_bad_folders_are_one_clear_error(tmp_path, capsys, case, message):
    d = _bad_folder(tmp_path, case)
    rc, out = _layers(capsys, str(d), str(d))
    assert rc == 2 and message in out, out


def test_nan_policy_is_the_npz_one(oracle_npz, tmp_path, capsys):
    """A NaN in a dumped tensor is a divergence at that tensor (layers, exit 1); NaN logits leave no
    distribution to compare (parity, exit 2), as for a .npz."""
    run = read_run(oracle_npz)
    t = {k: v.copy() for k, v in run.tensors.items()}
    t["attn_out-0"][2, 3] = np.nan
    t["result_output"][0, 0] = np.nan
    d = _write_raw_folder(tmp_path / "nan", t, run.tokens)
    rc, out = _layers(capsys, str(oracle_npz), str(d))
    assert rc == 1 and "first divergence at layer 0, attn_out-0" in out
    assert cli(["parity", str(oracle_npz), str(d)]) == 2 and "NaN" in capsys.readouterr().err


def test_name_map_is_consistent():
    """Every HF-style name maps back to its llama.cpp name under its architecture; a name shared by
    all architectures needs no architecture; `logitcheck names` prints the map."""
    for arch in HF_NAMES:
        for graph, hf in table(arch):
            if hf is None:
                continue
            g, h = graph.replace("-N", "-7"), hf.replace(".N", ".7")
            assert to_graph_name(h, arch) == g and to_graph_name(g, arch) == g
    assert to_graph_name("model.layers.7") == "l_out-7" and to_graph_name("logits") == "result_output"
    assert to_graph_name("model.layers.7.post_attention_layernorm", "llama") == "ffn_norm-7"
    assert to_graph_name("model.layers.7.post_attention_layernorm", "gemma2") == "attn_post_norm-7"
    assert to_graph_name("lm_head", "gemma2") is None  # before gemma2's final softcap: not result_output


def test_every_tensor_llama_cpp_dumps_is_a_graph_name():
    """Each name llama.cpp's graphs are read under (fixtures.llama_graph: per-layer ops with the layer,
    gemma3n's AltUp ``predictions`` before ``attn_norm`` included; the others without) is accepted."""
    for op in llama_graph.PER_LAYER:
        assert is_graph_name(f"{op}-3") and not is_graph_name(op), op
    for op in llama_graph.GLOBAL:
        assert is_graph_name(op) and not is_graph_name(f"{op}-3"), op


def _altup_streams(hf_name: str, graph: str, v: np.ndarray, streams: int) -> np.ndarray:
    """gemma3n's decoder layer output as transformers returns it: [streams, batch 1, tokens, hidden]."""
    if hf_name.startswith("model.layers.") and graph.startswith("l_out-"):
        return np.ascontiguousarray(v.reshape(v.shape[0], streams, -1).transpose(1, 0, 2)[:, None])
    return v


@pytest.mark.parametrize("arch", ["gemma4", "gemma3n"])
def test_gemma_per_layer_input_dumps_named_either_way(arch, tmp_path, capsys):
    """A folder of the oracle's gemma4 / gemma3n tensors, named by llama.cpp's graph names or by
    transformers' module names (gemma3n's decoder-layer output written stream-major, as its module
    returns it), reads back name by name as the oracle's run, and `layers` against the run finds no
    divergence. The HF-style folder covers every module the map names for the architecture."""
    run = forward(runs.model(arch, "F32"), runs.TOKENS)
    f32 = {k: v.astype(np.float32) for k, v in run.tensors.items()}
    ref = tmp_path / "ref.npz"
    np.savez(ref, tokens=run.tokens, **{("logits" if k == "result_output" else k): v for k, v in f32.items()})
    streams = ARCHS[arch].altup_streams
    hf = {}
    for k, v in f32.items():
        name = _hf(k, arch) or k
        hf[name] = _altup_streams(name, k, v, streams) if streams else v
    mapped = {op for op, _ in HF_NAMES[arch].items()}
    assert mapped <= {k.partition("-")[0] for k in f32}, mapped - {k.partition("-")[0] for k in f32}
    assert sum(h != k for h, k in zip(hf, f32)) >= len(mapped)
    for d in (_write_npy_folder(tmp_path / "graph", f32, run.tokens), _write_npy_folder(tmp_path / "hf", hf, run.tokens)):
        back = read_run(d, arch)
        assert back.tensors.keys() == f32.keys()
        assert all(np.array_equal(back.tensors[k], f32[k]) for k in f32), d
        rc, out = _layers(capsys, str(ref), str(d), "--arch", arch)
        assert rc == 0 and "no tensor beyond" in out and "per_layer_embd_out-1" in out, out


def test_altup_streams_in_a_wrong_layout_are_one_error(tmp_path, capsys):
    d = tmp_path / "streams"
    d.mkdir()
    np.save(d / "model.layers.0.npy", np.zeros((3, 1, 5, 8), np.float32))
    rc, out = _layers(capsys, str(d), str(d), "--arch", "gemma3n")
    assert rc == 2 and "must be stream-major, [4, tokens, hidden]" in out, out


def test_names_command(capsys):
    assert cli(["names", "--arch", "gemma2"]) == 0
    out = capsys.readouterr().out
    assert "ffn_norm-N" in out and "model.layers.N.pre_feedforward_layernorm" in out and "l_out-N" in out
    assert cli(["names"]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert all(a in head for a in HF_NAMES)
    assert cli(["names", "--arch", "nope"]) == 2 and "no HF-style names" in capsys.readouterr().err


WRITERS = {
    "c": ("gcc", lambda exe: ["gcc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-O2",
                              str(EXAMPLES / "write_dumps.c"), "-o", str(exe)]),
    "rust": ("rustc", lambda exe: ["rustc", "--edition", "2021", "-O", "-D", "warnings",
                                   str(EXAMPLES / "write_dumps.rs"), "-o", str(exe)]),
}


def _expected() -> dict[str, np.ndarray]:
    """What both writers compute, value(t, j) = ((t·31 + j·7 + salt) mod 97) / 97 − 0.5 in float32."""
    def fill(cols: int, salt: int) -> np.ndarray:
        t, j = np.meshgrid(np.arange(4), np.arange(cols), indexing="ij")
        return ((t * 31 + j * 7 + salt) % 97).astype(np.float32) / np.float32(97) - np.float32(0.5)
    names = ["embd", "l_out-0", "l_out-1", "result_norm"]
    return {n: fill(8, i) for i, n in enumerate(names)} | {"result_output": fill(16, 4)}


def _built(lang: str, tmp_path: Path) -> Path:
    tool, cmd = WRITERS[lang]
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed: the {lang} writer cannot be built here")
    exe = tmp_path / f"write_dumps_{lang}"
    build = subprocess.run(cmd(exe), capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-3000:]
    out = tmp_path / f"out_{lang}"
    out.mkdir()
    ran = subprocess.run([str(exe), str(out)], capture_output=True, text=True, timeout=60)
    assert ran.returncode == 0, ran.stderr
    return out


@pytest.mark.parametrize("lang", list(WRITERS))
def test_example_writer_output_is_read_by_layers_and_parity(lang, tmp_path, capsys):
    out = _built(lang, tmp_path)
    run = read_run(out, "llama")
    want = _expected()
    assert run.tensors.keys() == want.keys() and run.tokens.tolist() == [1, 5, 9, 13]
    assert all(np.array_equal(run.tensors[k], want[k]) for k in want)  # bit for bit
    ref = tmp_path / "ref.npz"
    np.savez(ref, tokens=np.array([1, 5, 9, 13]), logits=want.pop("result_output"), **want)
    rc, text = _layers(capsys, str(ref), str(out), "--arch", "llama")
    assert rc == 0 and "no tensor beyond" in text
    assert cli(["parity", str(ref), str(out), "--arch", "llama", "--max-kld", "0", "--min-top1", "1"]) == 0
    off = tmp_path / "off.npz"
    np.savez(off, tokens=np.array([1, 5, 9, 13]), logits=np.zeros((4, 16)),
             **{k: (v * 2 if k == "l_out-1" else v) for k, v in want.items()})
    rc, text = _layers(capsys, str(off), str(out), "--arch", "llama")
    assert rc == 1 and "first divergence at layer 1, l_out-1" in text


def test_the_writers_in_the_docs_are_the_compiled_ones():
    """docs/parity.md shows each writer's dump function; it must be the code the test above runs."""
    doc = (ROOT / "docs" / "parity.md").read_text()
    for lang, source in (("c", "write_dumps.c"), ("rust", "write_dumps.rs")):
        blocks = doc.split(f"```{lang}\n")[1:]
        assert blocks, f"no {lang} block in docs/parity.md"
        code = blocks[0].split("```")[0]
        assert code.strip() and code in (EXAMPLES / source).read_text(), lang


def test_llama_cpp_own_gemma4_spelling_is_read_as_the_common_names(tmp_path, capsys):
    """A gemma4 dump named as llama.cpp's own graph names it (rotated q/k ``Qcur_pos``/``Kcur_pos``,
    raw projections ``Qcur``/``Kcur``, the attention residual ``attn_out``): the aliases are renamed
    to the common names, the raw projections are left out (compared with the rotated q they would
    call a correct engine wrong), and `layers` against the oracle's run finds no divergence."""
    run = forward(runs.model("gemma4", "F32"), runs.TOKENS)
    f32 = {k: v.astype(np.float32) for k, v in run.tensors.items()}
    ref = tmp_path / "ref.npz"
    np.savez(ref, tokens=run.tokens, **{("logits" if k == "result_output" else k): v for k, v in f32.items()})
    spelled = {}
    for k, v in f32.items():
        op, _, layer = k.partition("-")
        if op in ("Qcur", "Kcur"):
            spelled[f"{op}_pos-{layer}"] = v
            spelled[k] = v[:, ::-1].copy()  # llama.cpp's raw projection: another tensor under this name
        elif op == "sa_out":
            spelled[f"attn_out-{layer}"] = v
        elif op != "attn_out":  # the common attn_out (the projection) has another name in this graph
            spelled[k] = v
    back = read_run(_write_npy_folder(tmp_path / "llama", spelled, run.tokens), "gemma4")
    want = {k for k in f32 if not k.startswith("attn_out-")}
    assert back.tensors.keys() == want, back.tensors.keys() ^ want
    assert all(np.array_equal(back.tensors[k], f32[k]) for k in want)
    rc, out = _layers(capsys, str(ref), str(tmp_path / "llama"), "--arch", "gemma4")
    assert rc == 0 and "no tensor beyond" in out, out


# ---- the second parity round: tokens, batch axes, names with no graph tensor, help and names ----

def _gemma4_ref(tmp_path: Path) -> tuple[dict[str, np.ndarray], Path, np.ndarray]:
    run = forward(runs.model("gemma4", "F32"), runs.TOKENS)
    f32 = {k: v.astype(np.float32) for k, v in run.tensors.items()}
    ref = tmp_path / "ref.npz"
    np.savez(ref, tokens=run.tokens, **{("logits" if k == "result_output" else k): v for k, v in f32.items()})
    return f32, ref, run.tokens


def test_layers_refuses_runs_of_different_tokens(oracle_npz, tmp_path, capsys):
    """Both runs' token ids, where both have them, must be the same for `layers` as for `parity`
    (the first round compared them anyway and called the embedding "structural, ×inf")."""
    run = read_run(oracle_npz)
    other = run.tokens.copy()
    other[5] += 1
    d = _write_npy_folder(tmp_path / "other", run.tensors, other)
    rc, out = _layers(capsys, str(oracle_npz), str(d))
    assert rc == 2 and "REF and TEST were run on different tokens" in out and "position 5" in out, out
    assert cli(["parity", str(oracle_npz), str(d)]) == 2
    assert "different tokens" in capsys.readouterr().err


def test_batch_axis_is_one_rule_for_parity_and_layers(oracle_npz, tmp_path, capsys):
    """transformers' [1, tokens, …] (logits [1, tokens, vocab]) loses its batch axis in every
    reader: `layers` and `parity` both read it as the run without it (the first round: accepted
    by layers and compared wrongly, rejected by parity)."""
    run = read_run(oracle_npz)
    batched = {k: v[None].reshape(1, v.shape[0], -1, 4) if v.shape[1] % 4 == 0 else v[None]
               for k, v in run.tensors.items()}
    d = _write_npy_folder(tmp_path / "batched", batched, run.tokens)
    back = read_run(d)
    assert all(np.array_equal(back.tensors[k], run.tensors[k]) for k in run.tensors)
    rc, out = _layers(capsys, str(oracle_npz), str(d))
    assert rc == 0 and "no tensor beyond" in out, out
    assert cli(["parity", str(oracle_npz), str(d), "--max-kld", "1e-9"]) == 0
    np.save(tmp_path / "logits.npy", run.tensors["result_output"][None])  # a bare .npy: rows from its own shape
    assert cli(["parity", str(oracle_npz), str(tmp_path / "logits.npy"), "--max-kld", "1e-9"]) == 0


@pytest.mark.parametrize("form", ["folder", "npz"])
def test_hf_names_without_a_graph_tensor_are_skipped_and_listed(tmp_path, capsys, form):
    """q_proj (its output precedes RoPE) and gemma4's lm_head (a final softcap follows it) have no
    llama.cpp graph tensor: skipped and listed, the same in a folder and a .npz, never an error."""
    f32, ref, toks = _gemma4_ref(tmp_path)
    extra = {"model.layers.0.self_attn.q_proj": f32["Qcur-0"], "lm_head": f32["result_output"]}
    if form == "folder":
        where = _write_npy_folder(tmp_path / "hf", f32 | extra, toks)
    else:
        where = tmp_path / "hf.npz"
        np.savez(where, tokens=toks, **f32, **extra)
    back = read_run(where, "gemma4")
    assert sorted(back.skipped) == sorted(extra) and back.tensors.keys() == f32.keys()
    rc, out = _layers(capsys, str(ref), str(where), "--arch", "gemma4")
    assert rc == 0 and "skipped 2 HF-style name(s) with no llama.cpp graph tensor" in out and "lm_head" in out, out


def _llama_spelled(f32: dict[str, np.ndarray], rotated: bool) -> dict[str, np.ndarray]:
    """The oracle's gemma4 tensors named as llama.cpp's own gemma4 graph names them; without
    ``rotated`` its Qcur_pos/Kcur_pos left out."""
    out = {}
    for k, v in f32.items():
        op, _, layer = k.partition("-")
        if op in ("Qcur", "Kcur"):
            if rotated:
                out[f"{op}_pos-{layer}"] = v
            out[k] = v[:, ::-1].copy()  # llama.cpp's raw projection under the common name
        elif op == "sa_out":
            out[f"attn_out-{layer}"] = v
        elif op != "attn_out":
            out[k] = v
    return out


def test_llama_cpp_gemma4_spelling_without_rotated_qk_is_read_by_value(tmp_path, capsys):
    """A dump in llama.cpp's gemma4 spelling without Qcur_pos/Kcur_pos: its attn_out equals
    attn_post_norm plus the block input, so it is the residual and is read as sa_out (the first
    round compared it with the output projection: a false divergence at attn_out-0); the raw
    Qcur/Kcur are left out. Without the tensors that tell, it is refused with the reason; the
    common spelling (attn_out the projection) is read as it is."""
    f32, ref, toks = _gemma4_ref(tmp_path)
    d = _write_npy_folder(tmp_path / "llama", _llama_spelled(f32, rotated=False), toks)
    back = read_run(d, "gemma4")
    want = {k for k in f32 if not k.startswith(("attn_out-", "Qcur-", "Kcur-"))}
    assert back.tensors.keys() == want, back.tensors.keys() ^ want
    assert all(np.array_equal(back.tensors[k], f32[k]) for k in want)
    rc, out = _layers(capsys, str(ref), str(d), "--arch", "gemma4")
    assert rc == 0 and "no tensor beyond" in out, out
    common = {k: v for k, v in f32.items() if not k.startswith("sa_out-")}
    back = read_run(_write_npy_folder(tmp_path / "common", common, toks), "gemma4")
    assert back.tensors.keys() == common.keys()
    bare = {k: v for k, v in _llama_spelled(f32, rotated=False).items() if not k.startswith("attn_post_norm-")}
    rc, out = _layers(capsys, str(ref), str(_write_npy_folder(tmp_path / "bare", bare, toks)), "--arch", "gemma4")
    assert rc == 2 and "'attn_out-0' is ambiguous" in out and "rename it" in out, out


def test_parity_help_names_only_its_options(capsys):
    with pytest.raises(SystemExit):
        cli(["parity", "--help"])
    out = capsys.readouterr().out
    assert "--model" not in out and "--arch" in out


def test_names_lists_only_the_architectures_tensors_in_aligned_columns(capsys):
    """`names --arch gemma3` lists gemma3's tensors only (no per-layer inputs, no AltUp, no v norm);
    every column starts at one offset however long its entries."""
    from oracle.models.names import arch_ops

    assert cli(["names", "--arch", "gemma3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    listed = {ln.split()[0].removesuffix("-N") for ln in lines[1:-1]}
    assert listed == set(arch_ops("gemma3")), listed ^ set(arch_ops("gemma3"))
    assert cli(["names"]) == 0
    lines = capsys.readouterr().out.splitlines()
    col = lines[0].index("gemma3n")
    long = next(ln for ln in lines if ln.startswith("attn_ffw_laurel_gated-N"))
    assert long[col - 2:col] == "  " and long[col:].startswith("-"), long
    assert all(ln[col - 1] == " " for ln in lines[1:-1]), "a column broke"


@pytest.mark.parametrize("arch", [a for a in ARCHS])
def test_arch_ops_are_the_tensors_the_passes_name(arch):
    """``names.arch_ops`` (from the architecture's record) against what the oracle's and gpu_impl's
    passes name on the tiny fixture: nothing more, and nothing less but gpu_impl's ``res_out``
    (the residual of a gemma4 block with an output scale and no per-layer inputs, which the
    fixture has)."""
    from gpu_impl.models import run
    from oracle.models.layers import split_name
    from oracle.models.names import arch_ops

    o = {split_name(k)[0] for k in forward(runs.model(arch, "F32"), runs.TOKENS[:4]).tensors}
    g = {split_name(k)[0] for k in run(runs.path(arch, "F32"), runs.TOKENS[:4])["tensors"]}
    assert o | g <= arch_ops(arch), (o | g) - arch_ops(arch)
    assert arch_ops(arch) - (o | g) <= {"res_out"}, arch_ops(arch) - (o | g)


def test_the_names_table_in_the_docs_is_the_commands():
    """docs/parity.md's `logitcheck names` block is what the command prints today."""
    from oracle.models.names import HF_NAMES
    from reports.models_cli import names_lines

    doc = (ROOT / "docs" / "parity.md").read_text()
    block = doc.split("<!-- names-table -->\n```text\n")[1].split("```")[0]
    assert block == "\n".join(names_lines(list(HF_NAMES))) + "\n", "regenerate the names block in docs/parity.md"
