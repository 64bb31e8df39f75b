"""A logit-injection GGUF that mistral.rs can load: ``fixtures.logit_injection``'s weights (token
t yields row t mod D, bit for bit with F32 output weights) plus the tokenizer metadata
mistral.rs requires (BOS / EOS / UNK ids, a chat template).

The vocabulary is SentencePiece-style: ids 0, 1, 2 are <unk>, <s>, </s>; every other id i is the
piece "▁t{i}", so the text "t5 t7" tokenizes to [5, 7] (no BOS is added) and a generated token's
piece names its id. The three special ids are ordinary entries of the row under test; a row
meant for iid draws gives them a logit far below the rest, so that EOS is never drawn.
"""
from __future__ import annotations

import os
from pathlib import Path

import gguf
import numpy as np

from fixtures import logit_injection as inj
from fixtures.gguf_gen import write_atomically

SPECIAL = 3  # <unk>, <s>, </s>
TEMPLATE = "{% for m in messages %}{{ m['content'] }}{% endfor %}"


def piece(i: int) -> str:
    return ("<unk>", "<s>", "</s>")[i] if i < SPECIAL else f"\u2581t{i}"


def token_id(text: str) -> int:
    """The id of a generated piece ("▁t12" or "t12" -> 12; the special pieces -> 0, 1, 2)."""
    t = text.strip().lstrip("\u2581")
    specials = {"<unk>": 0, "<s>": 1, "</s>": 2, "": 2}
    return specials[t] if t in specials else int(t[1:])


def prompt(ids) -> str:
    """The text that tokenizes to ``ids`` (each >= 3)."""
    bad = [i for i in ids if int(i) < SPECIAL]
    if bad:
        raise ValueError(f"ids {bad} are special tokens: no text spells them")
    return " ".join(f"t{int(i)}" for i in ids)


def write(path: os.PathLike[str] | str, rows: np.ndarray, context: int = 8192) -> Path:
    """Write the model: token t at any position yields ``rows[t mod D]`` (rows: [R, n_vocab], F32)."""
    rows = np.atleast_2d(np.asarray(rows, dtype=np.float32))
    r, v = rows.shape
    if v <= SPECIAL:
        raise ValueError(f"a row of {v} tokens leaves none after the {SPECIAL} special ones")
    d = inj.embedding_dim(r)
    weights = inj.tensors(rows, d)

    def fill(w: gguf.GGUFWriter) -> None:
        inj.add_header(w, f"logitcheck-injection-{v}x{d}-mistralrs", 0, context, d, [piece(i) for i in range(v)],
                       [2, 3, 3] + [1] * (v - SPECIAL))
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        w.add_unk_token_id(0)
        w.add_add_bos_token(False)
        w.add_chat_template(TEMPLATE)
        for name, values in weights.items():
            w.add_tensor(name, values)
    return write_atomically(Path(path), "llama", fill)
