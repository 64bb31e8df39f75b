"""Prompt framing decided from GGUF metadata (oracle.models.framing) equals llama.cpp's
``llama_tokenize(text, add_special=True)`` on every vocabulary variant (fixtures/vocab_variants:
SentencePiece with add_bos/add_eos absent, true or false; byte-level BPE by pre-tokenizer and
add_bos; WordPiece) and on the model fixtures (one per architecture). Framing mutants — a prompt that always
ends in EOS, a BOS added against add_bos_token=false — must be caught by the same check.
"""
from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from typing import Callable

import pytest
from gguf import GGUFReader

from fixtures import gguf_gen, vocab_variants
from oracle.models.framing import Framing, framing_of
from properties.models import runs

ROOT = Path(__file__).resolve().parents[2]
Frame = Callable[[dict, list[int]], list[int]]


def _kv(path: str) -> dict:
    r = GGUFReader(path)
    return {k: f.contents() for k, f in r.fields.items() if not k.startswith("GGUF.")}


@pytest.fixture(scope="module")
def llama_tokens(tmp_path_factory) -> dict[str, dict]:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip("llama_cpp (llama-cpp-python) is not importable: pip install 'logitcheck[peers]'")
    files = [str(p) for p in vocab_variants.write_all(tmp_path_factory.mktemp("vocab")).values()]
    files += [str(runs.path(a, "F32")) for a in gguf_gen.ARCHS]
    proc = subprocess.run([sys.executable, "-m", "fixtures.vocab_variants", *files], cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, f"llama.cpp tokenization failed (rc {proc.returncode}): {proc.stderr[-1500:]}"
    return json.loads(proc.stdout.strip().splitlines()[-1])


def mismatches(frame: Frame, llama_tokens: dict[str, dict]) -> list[str]:
    out = []
    for path, got in llama_tokens.items():
        assert "error" not in got, f"{path}: {got['error']}"
        mine = frame(_kv(path), got["plain"])
        if mine != got["special"]:
            out.append(f"{Path(path).name}: framing {mine[:2]}…{mine[-2:]} vs llama.cpp {got['special'][:2]}…"
                       f"{got['special'][-2:]}")
    return out


def oracle_frame(kv: dict, body: list[int]) -> list[int]:
    return framing_of(kv).frame(body)


@pytest.mark.peer
def test_framing_matches_llama_tokenize(llama_tokens):
    bad = mismatches(oracle_frame, llama_tokens)
    assert not bad, "\n".join(bad)
    assert len(llama_tokens) == len(vocab_variants.variants()) + len(gguf_gen.ARCHS)


def always_bos(kv: dict, body: list[int]) -> list[int]:
    f = framing_of(kv)
    framed = f.frame(body)
    return framed if f.add_bos else [f.bos if f.bos is not None else 1] + framed


@pytest.mark.peer
@pytest.mark.parametrize("name, mutant", [
    ("appends EOS to every prompt", lambda kv, body: oracle_frame(kv, body) + [framing_of(kv).eos or 2]),
    ("BOS whatever add_bos_token says", lambda kv, body: always_bos(kv, body)),
])
def test_framing_mutant_is_caught(llama_tokens, name, mutant):
    assert mismatches(mutant, llama_tokens), f"framing mutant '{name}' was not caught"


def test_model_fixture_prompts_do_not_end_in_eos():
    for arch in gguf_gen.ARCHS:
        f = framing_of(runs.model(arch, "F32").kv)
        framed = f.frame([5, 6, 7])
        assert framed[0] == f.bos == 1 and framed[-1] != f.eos, (arch, framed)


@pytest.mark.parametrize("kv, problem", [
    ({"tokenizer.ggml.model": "sentencepiece"}, "not one framing knows"),
    ({"tokenizer.ggml.model": "t5", "tokenizer.ggml.tokens": ["<pad>"], "tokenizer.ggml.add_eos_token": True},
     "EOS token but gives it no id"),
])
def test_framing_refuses_bad_metadata(kv, problem):
    with pytest.raises(ValueError, match=problem):
        framing_of(kv)


def test_wordpiece_frames_cls_sep_regardless_of_flags():
    f = Framing("wpm", 2, None, 3, False, False)
    assert f.frame([9]) == [2, 9, 3]
