"""Prompt framing: which special tokens a prompt gets around its text, decided from GGUF
metadata the way llama.cpp decides it (llama-vocab.cpp, ``llama_tokenize(..., add_special)``).

Defaults by tokenizer model, then the GGUF keys override them:
- "llama" (SentencePiece): BOS id 1, EOS id 2; add BOS, no EOS.
- "gpt2" (byte-level BPE): BOS = EOS = id 11 by default; no BOS unless the pre-tokenizer is one
  that asks for it (llama3 family, tekken, chameleon); glm4/chatglm-bpe have no BOS.
- "bert" (WordPiece): BOS (CLS) 101, SEP 102; always CLS … SEP, whatever the add_* keys say.
- "t5" (Unigram): EOS 1; no BOS, add EOS.  "rwkv": nothing.  "no_vocab"/"none": nothing.
``tokenizer.ggml.{bos,eos,seperator}_token_id`` replace the ids when inside the vocabulary (a
default id outside it is dropped); ``tokenizer.ggml.add_{bos,eos}_token`` replace the flags;
a flag asking for a token that has no id is an error (llama.cpp refuses the model).

A prompt is never given an EOS unless the metadata asks for it: appending EOS to a prompt (a
known porting bug) tells the model the text is over.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

BPE_WITH_BOS = {"llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1", "pixtral", "midm-2.0", "lfm2",
                "jina-v5-nano", "tekken", "chameleon"}
BPE_WITHOUT_BOS_ID = {"glm4", "chatglm-bpe"}
# tokenizer model -> (kind, default bos id, default eos id, default sep id, add bos, add eos)
DEFAULTS: dict[str, tuple[str, int | None, int | None, int | None, bool, bool]] = {
    "llama": ("spm", 1, 2, None, True, False),
    "gpt2": ("bpe", 11, 11, None, False, False),
    "bert": ("wpm", 101, None, 102, True, False),
    "t5": ("ugm", None, 1, None, False, True),
    "rwkv": ("rwkv", None, None, None, False, False),
}


@dataclass(frozen=True)
class Framing:
    kind: str
    bos: int | None
    eos: int | None
    sep: int | None
    add_bos: bool
    add_eos: bool

    def frame(self, body: Sequence[int]) -> list[int]:
        """The ids llama.cpp feeds for a text whose plain tokenization is ``body``."""
        if self.kind == "wpm":
            return [self.bos, *body, self.sep]
        if self.kind in ("none", "rwkv"):
            return list(body)
        return ([self.bos] if self.add_bos else []) + list(body) + ([self.eos] if self.add_eos else [])


def _id(kv: dict[str, Any], key: str, default: int | None, n_vocab: int) -> int | None:
    if default is not None and default >= n_vocab:
        default = None
    v = kv.get(f"tokenizer.ggml.{key}")
    return int(v) if v is not None and 0 <= int(v) < n_vocab else default


def framing_of(kv: dict[str, Any]) -> Framing:
    model = kv.get("tokenizer.ggml.model")
    if model in ("no_vocab", "none"):
        return Framing("none", None, None, None, False, False)
    if model not in DEFAULTS:
        raise ValueError(f"tokenizer model {model!r} is not one framing knows ({', '.join(DEFAULTS)})")
    kind, bos, eos, sep, add_bos, add_eos = DEFAULTS[model]
    if kind == "bpe":
        pre = kv.get("tokenizer.ggml.pre") or "default"
        add_bos = pre in BPE_WITH_BOS
        bos = None if pre in BPE_WITHOUT_BOS_ID else bos
    n_vocab = len(kv.get("tokenizer.ggml.tokens") or [])
    bos, eos = _id(kv, "bos_token_id", bos, n_vocab), _id(kv, "eos_token_id", eos, n_vocab)
    sep = _id(kv, "seperator_token_id", sep, n_vocab)
    if kv.get("tokenizer.ggml.add_bos_token") is not None:
        add_bos = bool(kv["tokenizer.ggml.add_bos_token"])
    if kv.get("tokenizer.ggml.add_eos_token") is not None:
        add_eos = bool(kv["tokenizer.ggml.add_eos_token"])
    for flag, tok, name in ((add_bos, bos, "BOS"), (add_eos, eos, "EOS"), (kind == "wpm", sep, "SEP")):
        if flag and tok is None:
            raise ValueError(f"the metadata asks for a {name} token but gives it no id in the vocabulary")
    return Framing(kind, bos, eos, sep, add_bos, add_eos)
