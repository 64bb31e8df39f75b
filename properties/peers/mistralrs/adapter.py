"""mistral.rs's real sampler (the ``mistralrs`` 0.9.5 CPU wheel), driven on chosen rows through
logit-injection models (``injection``): every D rows of the model are the row under test, so
every position of every request samples from it.

What the Python API gives, per request (``ChatCompletionRequest``; ``Runner`` loads a model in
~10 ms): the generated token ids (``n_choices`` sequences in one request: ~0.2 ms a draw), and
with ``logprobs`` each step's logprob and its ``top_logprobs`` (token ids and logprobs). What it
does not give: a choice of RNG stream - every Runner starts the same stream, ``seed=`` changes
nothing (and raises "cannot seed the CPU rng with set_seed" on a process's first Runner), so draws
repeat run to run but are judged statistically, never replayed uniform by uniform; and the
filtered weights -
the reported logprobs are taken before top_k / top_p / min_p, so the survivors are read from
draws. The prompt is the history the penalties see (tokenized to the ids, no BOS); the
generated tokens of one request are the "output" presence and frequency count.
"""
from __future__ import annotations

import contextlib
import importlib.metadata
import shutil
from dataclasses import dataclass
from typing import Iterator

import numpy as np

from fixtures import logit_injection as inj
from oracle.engines import Settings
from properties.peers.mistralrs import injection

PINNED = "0.9.5"
SPECIAL_LOGIT = -60.0  # the <unk> / <s> / </s> entries of an iid row: p < e^-50 relative, never drawn


def available() -> str | None:
    """None when the pinned mistral.rs is importable, else why the mistral.rs tests skip."""
    try:
        import mistralrs  # noqa: F401
    except Exception as exc:
        return (f"mistralrs is not importable ({type(exc).__name__}: {exc}); install the pinned peers: "
                "pip install -e '.[peers-engines]'")
    got = version()
    if got != PINNED:
        return f"mistral.rs peer pinned at {PINNED}, installed {got}: the variant is derived from the pinned release"
    return None


def version() -> str:
    try:
        return importlib.metadata.version("mistralrs")
    except importlib.metadata.PackageNotFoundError:
        return "absent"


def with_specials(row) -> np.ndarray:
    """The row under test behind the three special entries (ids 0-2), which get SPECIAL_LOGIT:
    token i of the row is id i + 3."""
    return np.concatenate([np.full(injection.SPECIAL, SPECIAL_LOGIT), np.asarray(row, dtype=np.float64)])


@dataclass
class Step:
    token: int
    logprob: float
    top: dict[int, float]


class Engine:
    """One loaded model whose every position yields ``row`` (float32, specials included)."""

    def __init__(self, row: np.ndarray) -> None:
        import mistralrs

        self.m = mistralrs
        self.row = np.asarray(row, dtype=np.float32)
        self.dir = inj.scratch_dir()
        rows = np.tile(self.row, (4, 1))  # D = 4: tokens t and t + 4k select the same row
        injection.write(self.dir / "m.gguf", rows)
        self.runner = mistralrs.Runner(which=mistralrs.Which.GGUF(quantized_model_id=str(self.dir),
                                                                  quantized_filename="m.gguf"), no_paged_attn=True)

    def close(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)

    def request(self, s: Settings, max_tokens: int = 1, n: int = 1, logprobs: bool = False,
                bias: dict[int, float] | None = None):
        m = self.m
        if s.output:
            raise ValueError("an output history is what a request generates: pass it as steps, not settings")
        kw = {k: v for k, v in dict(
            temperature=float(s.temperature), top_k=int(s.top_k) if s.top_k > 0 else None,
            top_p=float(s.top_p) if s.top_p < 1.0 else None, min_p=float(s.min_p) if s.min_p > 0 else None,
            repetition_penalty=float(s.repetition_penalty) if s.repetition_penalty != 1.0 else None,
            presence_penalty=float(s.presence_penalty) or None,
            frequency_penalty=float(s.frequency_penalty) or None).items() if v is not None}
        req = m.ChatCompletionRequest(messages=injection.prompt(s.prompt or (injection.SPECIAL,)), model="x",
                                      max_tokens=max_tokens, n_choices=n, ignore_eos=True, logprobs=logprobs,
                                      top_logprobs=self.row.size if logprobs else None, logit_bias=bias, **kw)
        return self.runner.send_chat_completion_request(req)

    def steps(self, s: Settings, max_tokens: int, bias: dict[int, float] | None = None) -> list[Step]:
        """One sequence of ``max_tokens`` steps with every step's logprobs."""
        res = self.request(s, max_tokens, 1, logprobs=True, bias=bias)
        return [Step(injection.token_id(c.token), float(c.logprob), {int(t.token): float(t.logprob)
                                                                     for t in c.top_logprobs})
                for c in res.choices[0].logprobs.content]

    def draws(self, s: Settings, n: int, per_request: int = 500, bias: dict[int, float] | None = None) -> np.ndarray:
        """n first tokens (one step each, ``n_choices`` sequences per request; 500 a request: the
        cost grows faster than linearly beyond)."""
        out: list[int] = []
        while len(out) < n:
            k = min(per_request, n - len(out))
            res = self.request(s, 1, k, bias=bias)
            out += [injection.token_id(c.message.content) for c in res.choices]
        return np.asarray(out, dtype=np.int64)


@contextlib.contextmanager
def engine(row) -> Iterator[Engine]:
    e = Engine(np.asarray(row, dtype=np.float32))
    try:
        yield e
    finally:
        e.close()
