"""Sampler chains, llama.cpp's default parameters and default order.

``common_params_sampling`` defaults and ``--sampling-seq edskypmxt``: penalties, dry,
top_n_sigma, top_k, typical, top_p, min_p, xtc, temperature (temp_ext), then dist; a
logit_bias sampler goes first when there are biases; mirostat 1/2 replace the chain with
temp -> mirostat.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from oracle import samplers as s
from oracle.candidates import TokenDataArray
from oracle.samplers.base import Sampler


class Chain(Sampler):
    """``llama_sampler_chain``: apply in order, forward accept/reset to every member."""

    name = "chain"

    def __init__(self, members: Sequence[Sampler]) -> None:
        self.members = list(members)

    def apply(self, cur: TokenDataArray) -> None:
        for member in self.members:
            member.apply(cur)

    def accept(self, token: int) -> None:
        for member in self.members:
            member.accept(token)

    def reset(self) -> None:
        for member in self.members:
            member.reset()

    def __repr__(self) -> str:
        return " -> ".join(map(repr, self.members))

    def sample(self, logits: np.ndarray) -> int:
        """``llama_sampler_sample``: fresh array from raw logits, apply, read the token, accept it."""
        cur = TokenDataArray.from_logits(logits)
        self.apply(cur)
        token = cur.selected_token
        self.accept(token)
        return token


@dataclass(frozen=True)
class SamplingParams:
    """``common_params_sampling`` (the fields the samplers use), with llama.cpp's defaults."""

    seed: int = 0xFFFFFFFF
    top_k: int = 40
    top_p: float = 0.95
    min_p: float = 0.05
    temp: float = 0.80
    min_keep: int = 0
    typ_p: float = 1.0
    xtc_probability: float = 0.0
    xtc_threshold: float = 0.10
    top_n_sigma: float = -1.0
    dynatemp_range: float = 0.0
    dynatemp_exponent: float = 1.0
    penalty_last_n: int = 64
    penalty_repeat: float = 1.0
    penalty_freq: float = 0.0
    penalty_present: float = 0.0
    dry_multiplier: float = 0.0
    dry_base: float = 1.75
    dry_allowed_length: int = 2
    dry_penalty_last_n: int = 64
    dry_breakers: tuple[tuple[int, ...], ...] = ()
    mirostat: int = 0
    mirostat_tau: float = 5.0
    mirostat_eta: float = 0.10
    logit_bias: tuple[tuple[int, float], ...] = ()
    sequence: str = "edskypmxt"
    extra: dict = field(default_factory=dict, compare=False)


DEFAULT_SEQUENCE = "edskypmxt"


def _by_letter(p: SamplingParams) -> dict[str, Sampler]:
    return {
        "e": s.penalties(p.penalty_last_n, p.penalty_repeat, p.penalty_freq, p.penalty_present),
        "d": s.dry(p.dry_multiplier, p.dry_base, p.dry_allowed_length, p.dry_penalty_last_n, p.dry_breakers),
        "s": s.top_n_sigma(p.top_n_sigma),
        "k": s.top_k(p.top_k),
        "y": s.typical(p.typ_p, p.min_keep),
        "p": s.top_p(p.top_p, p.min_keep),
        "m": s.min_p(p.min_p, p.min_keep),
        "x": s.xtc(p.xtc_probability, p.xtc_threshold, p.min_keep, p.seed),
        "t": s.temp_ext(p.temp, p.dynatemp_range, p.dynatemp_exponent),
    }


def default_chain(params: SamplingParams = SamplingParams(), n_vocab: int = 0, selector: bool = True) -> Chain:
    """The chain ``common_sampler_init`` builds for these parameters (without its final ``dist``
    when ``selector`` is False: the candidate array dist would receive)."""
    members: list[Sampler] = []
    if params.logit_bias:
        members.append(s.logit_bias(n_vocab, params.logit_bias))
    if params.mirostat == 1:
        members += [s.temp(params.temp), s.mirostat(n_vocab, params.seed, params.mirostat_tau, params.mirostat_eta, 100)]
    elif params.mirostat == 2:
        members += [s.temp(params.temp), s.mirostat_v2(params.seed, params.mirostat_tau, params.mirostat_eta)]
    elif params.mirostat == 0:
        table = _by_letter(params)
        unknown = set(params.sequence) - set(table)
        if unknown:
            raise ValueError(f"unknown sampler letters {sorted(unknown)} in sequence {params.sequence!r}")
        members += [table[c] for c in params.sequence] + ([s.dist(params.seed)] if selector else [])
    else:
        raise ValueError(f"mirostat must be 0, 1 or 2, got {params.mirostat}")
    return Chain(members)
