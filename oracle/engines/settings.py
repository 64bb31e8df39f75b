"""One user-facing sampler configuration, shared by every engine variant.

Each engine reads the fields it has and ignores none silently: ``supported(engine)`` says which
fields an engine can express, and a variant asked for a field it lacks raises ValueError.
Neutral values switch a stage off: temperature 1, top_k <= 0, top_p >= 1, min_p <= 0,
typical_p >= 1, epsilon <= 0, eta <= 0, penalties 1 / 0 / 0.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace
from typing import Iterable

import numpy as np

from oracle.candidates import validate_logits_row


@dataclass(frozen=True)
class Settings:
    temperature: float = 1.0
    top_k: int = 0
    top_p: float = 1.0
    min_p: float = 0.0
    typical_p: float = 1.0
    epsilon: float = 0.0
    eta: float = 0.0
    repetition_penalty: float = 1.0
    presence_penalty: float = 0.0
    frequency_penalty: float = 0.0
    prompt: tuple[int, ...] = ()
    output: tuple[int, ...] = ()
    min_tokens_to_keep: int = 1
    repeat_last_n: int = 64
    """Penalty window of the engines that have one (llama.cpp ``penalty_last_n``, candle ``repeat_last_n``)."""

    def __post_init__(self) -> None:
        for f in ("temperature", "top_p", "min_p", "typical_p", "epsilon", "eta", "repetition_penalty",
                  "presence_penalty", "frequency_penalty"):
            if not math.isfinite(float(getattr(self, f))):
                raise ValueError(f"Settings.{f}={getattr(self, f)} must be finite")
        if not float(self.repetition_penalty) > 0:
            raise ValueError(f"Settings.repetition_penalty={self.repetition_penalty} must be > 0")
        if int(self.min_tokens_to_keep) < 1:
            raise ValueError(f"Settings.min_tokens_to_keep={self.min_tokens_to_keep} must be >= 1")

    def with_(self, **kw) -> "Settings":
        return replace(self, **kw)

    @property
    def history(self) -> tuple[int, ...]:
        return tuple(self.prompt) + tuple(self.output)

    def active(self) -> set[str]:
        """Fields that differ from their neutral value (what an engine must be able to express)."""
        on = set()
        if self.temperature != 1.0:
            on.add("temperature")
        if self.top_k > 0:
            on.add("top_k")
        if self.top_p < 1.0:
            on.add("top_p")
        if self.min_p > 0.0:
            on.add("min_p")
        if self.typical_p < 1.0:
            on.add("typical_p")
        if self.epsilon > 0.0:
            on.add("epsilon")
        if self.eta > 0.0:
            on.add("eta")
        if self.repetition_penalty != 1.0 and self.history:
            on.add("repetition_penalty")
        # with a history at all: llama.cpp and mistral.rs count the prompt too (vLLM only the output)
        if self.presence_penalty != 0.0 and self.history:
            on.add("presence_penalty")
        if self.frequency_penalty != 0.0 and self.history:
            on.add("frequency_penalty")
        return on


FIELDS = tuple(f.name for f in fields(Settings))


def require(engine: str, supported: Iterable[str], s: Settings) -> None:
    missing = sorted(s.active() - set(supported))
    if missing:
        raise ValueError(f"{engine} has no equivalent of {missing}")


def with_traits(engine: str, own: dict, toggles: Iterable[str], overrides: dict) -> dict:
    """``own`` (an engine's semantic traits) with ``overrides`` applied: the engine run with those
    differences removed. A trait it cannot run with another value of raises ValueError."""
    unknown = sorted(set(overrides) - set(own))
    if unknown:
        raise ValueError(f"unknown traits {unknown} (known: {sorted(own)})")
    fixed = sorted(k for k, v in overrides.items() if v != own[k] and k not in set(toggles))
    if fixed:
        raise ValueError(f"{engine} cannot run with {', '.join(f'{k}={overrides[k]!r}' for k in fixed)}")
    return {**own, **overrides}


def as_row(logits: np.ndarray) -> np.ndarray:
    """float64 1-D logits; NaN / +inf / empty rejected (``oracle.candidates`` rules)."""
    return validate_logits_row(logits)


def softmax(x: np.ndarray) -> np.ndarray:
    """softmax over the finite entries; -inf -> 0. An all -inf row has no distribution."""
    m = x.max()
    if not np.isfinite(m):
        raise ValueError("no finite logit: the distribution is undefined")
    e = np.exp(x - m)
    return e / e.sum()


def log_softmax(x: np.ndarray) -> np.ndarray:
    m = x.max()
    with np.errstate(divide="ignore"):
        return x - m - np.log(np.exp(x - m).sum())


def first_argmax_onehot(x: np.ndarray) -> np.ndarray:
    out = np.zeros(x.size)
    out[int(np.argmax(x))] = 1.0
    return out


def inverse_cdf(probs: np.ndarray, u: float, strict: bool = False) -> int:
    """First token (vocab order) whose cumulative mass reaches ``u``·total (``>`` if strict)."""
    run = np.cumsum(probs)
    target = run[-1] * u
    hit = np.flatnonzero(run > target if strict else run >= target)
    hit = hit[probs[hit] > 0] if hit.size else hit
    return int(hit[0]) if hit.size else int(np.flatnonzero(probs > 0)[-1])


def counts(ids: Iterable[int], n_vocab: int) -> np.ndarray:
    """Occurrences of each token id in ``ids``; ids outside the vocabulary are ignored (as every engine does)."""
    arr = np.asarray([i for i in ids if 0 <= int(i) < n_vocab], dtype=np.int64)
    return np.bincount(arr, minlength=n_vocab)[:n_vocab] if arr.size else np.zeros(n_vocab, dtype=np.int64)


def first_noise(noise) -> float:
    u = float(np.asarray(noise, dtype=np.float64).ravel()[0])
    if not 0.0 <= u < 1.0:
        raise ValueError(f"noise must be uniforms in [0, 1), got {u}")
    return u


def uniforms(noise, n: int) -> np.ndarray:
    u = np.asarray(noise, dtype=np.float64).ravel()
    if u.size != n:
        raise ValueError(f"this engine needs one uniform per token ({n}), got {u.size}")
    if ((u < 0) | (u >= 1)).any():
        raise ValueError("noise must be uniforms in [0, 1)")
    return u
