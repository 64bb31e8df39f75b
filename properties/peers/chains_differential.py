"""The CPU-sampler differential in breadth: generated chains of every llama.cpp sampler, and long
seeded streams of every stateful one, judged step by step against the oracle.

A generated chain is any sequence of the non-selecting samplers (repeats allowed, so a stateful
penalties / DRY may follow a top_k that reordered and compacted the array) closed by one selector,
each with parameters from its ``PeerRecord`` (no-op points, zero and negative values, empty and
repeated bias / breaker lists). ``generated_chain_stream`` runs it as llama.cpp's chain
(``chain_init``/``chain_add``, ``llama_sampler_sample``) and, stage by stage, llama.cpp's members
against the oracle's with ``legal.legal_for`` + ``judge.check``; the end-to-end oracle chain must
pick the same token unless a stage legally differed (a tie or a float32 boundary).

``long_stream`` judges >= ``steps`` apply/accept rounds of one stateful sampler. A self-state
sampler (mirostat, mirostat_v2, adaptive_p) stops at its first legal divergence (its state then
follows a different selection); the stream restarts with the next seed until ``steps`` rounds are
judged, and the report keeps where each divergence happened - the measurement behind the README's
"identical for N steps" statements.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np
from hypothesis import assume, strategies as st

from oracle.candidates import TokenDataArray
from oracle.chain import Chain
from properties.peers import llama_cpp as peer
from properties.peers.judge import FindingDomain, Unsupported, Verdict
from properties.peers.legal import Drift
from properties.peers.records import RECORDS_BY_NAME, PeerRecord
from properties.peers.streams import PeerMismatch, SELF_STATE, StreamReport, judge_step, raw_state, state_of, stream
from properties.samplers.strategies import make_logits

MEMBERS = ("logit_bias", "penalties", "dry", "top_n_sigma", "top_k", "typical", "top_p", "min_p", "xtc",
           "temp", "temp_ext")
SELECTORS = ("dist", "greedy", "mirostat", "mirostat_v2", "adaptive_p")
STATEFUL = ("dist", "xtc", "penalties", "dry", "mirostat", "mirostat_v2", "adaptive_p")


@dataclass
class GeneratedChain:
    members: list  # [(PeerRecord, params)], the selector last
    history: list = field(default_factory=list)

    def __repr__(self) -> str:
        return " -> ".join(f"{r.name}{ {k: v for k, v in p.items() if k != 'history'} }" for r, p in self.members)

    @property
    def families(self) -> tuple[str, ...]:
        allowed = set(self.members[0][0].families)
        for r, _ in self.members[1:]:
            allowed &= set(r.families)
        return tuple(f for f in self.members[-1][0].families if f in allowed)


@st.composite
def generated_chains(draw, vocab: int, max_members: int = 5) -> GeneratedChain:
    names = draw(st.lists(st.sampled_from(MEMBERS), max_size=max_members), label="members")
    names.append(draw(st.sampled_from(SELECTORS), label="selector"))
    members = [(RECORDS_BY_NAME[n], draw(RECORDS_BY_NAME[n].params(vocab), label=n)) for n in names]
    history = draw(st.lists(st.integers(0, min(vocab, 6) - 1), max_size=12), label="history")
    chain = GeneratedChain(members, history)
    assume(chain.families)  # e.g. mirostat (zipf rows only) after typical (no underflowing rows)
    return chain


def _build(chain: GeneratedChain, vocab: int) -> tuple[list, list]:
    oracle = [r.oracle(p, vocab) for r, p in chain.members]
    llama = [r.peer(p, vocab) for r, p in chain.members]
    for smp in (*oracle, *llama):
        for t in chain.history:
            smp.accept(int(t))
    return oracle, llama


def generated_chain_stream(chain: GeneratedChain, family: str, vocab: int, seed: int, steps: int) -> StreamReport:
    """``steps`` rounds of llama.cpp's chain on fresh rows, every stage judged against the oracle."""
    e2e = Chain(_build(chain, vocab)[0])
    shadow_oracle, shadow_llama = _build(chain, vocab)
    drifts = [Drift() for _ in shadow_llama]
    rep = StreamReport()
    real = peer.chain(_build(chain, vocab)[1])
    try:
        for t in range(steps):
            x = make_logits(family, vocab, seed * 7919 + t)
            token = real.sample(x)
            cur, same, verdicts = raw_state(x, p=0.0), True, []
            try:
                for i, (om, pm, d) in enumerate(zip(shadow_oracle, shadow_llama, drifts)):
                    verdict, out = judge_step(om, pm, cur, d, f"step {t} stage {i} ({om.name})")
                    verdicts.append(verdict)
                    same &= verdict.identical
                    cur = state_of(out, vocab)
            except (FindingDomain, Unsupported) as f:
                rep.stopped = f"{'finding ' if isinstance(f, FindingDomain) else ''}{f.args[0]} at step {t}"
                break
            if int(cur.ids[cur.selected]) != token:
                raise PeerMismatch(f"step {t}: llama.cpp's chain picked {token}, its members one by one "
                                   f"{int(cur.ids[cur.selected])}")
            whole = TokenDataArray.from_logits(x.astype(np.float64))
            e2e.apply(whole)
            rep.add(Verdict(True, "", same, max(v.p_ratio for v in verdicts), max(v.logit_ratio for v in verdicts)))
            rep.token_differences += int(whole.selected_token != token)
            if same and whole.selected_token != token and x[whole.selected_token] != x[token]:
                raise PeerMismatch(f"step {t}: the oracle chain picked {whole.selected_token}, llama.cpp {token}, "
                                   "although every stage agreed (up to ties)")
            for smp in (e2e, *shadow_oracle, *shadow_llama):
                smp.accept(token)
            if not same:
                rep.divergences.append(t)
                if any(m.name in SELF_STATE and not v.identical for m, v in zip(shadow_oracle, verdicts)):
                    rep.stopped = f"legal divergence at step {t} in a self-state sampler"
                    break
                e2e = Chain(copy.deepcopy(shadow_oracle))  # its RNGs drew as llama.cpp's did
    finally:
        real.free()
        for pm in shadow_llama:
            pm.free()
    return rep


@dataclass
class LongStream:
    steps: int = 0
    identical: int = 0
    streams: int = 0
    first_divergence: list = field(default_factory=list)  # per stream: the step of its first legal divergence
    stops: list = field(default_factory=list)


def long_stream(record: PeerRecord, params: dict, family: str, vocab: int, seed: int, steps: int) -> LongStream:
    """At least ``steps`` judged rounds of ``record``, restarting (next seed) after a stop."""
    out = LongStream()
    while out.steps < steps and out.streams < steps:  # every stream judges at least one round
        p = {**params, "seed": params["seed"] + out.streams} if "seed" in params else params
        rep = stream(record, p, family, vocab, seed + out.streams, steps - out.steps)
        out.streams += 1
        out.steps += rep.steps
        out.identical += rep.identical
        if rep.divergences:
            out.first_divergence.append(rep.divergences[0])
        if rep.stopped:
            out.stops.append(rep.stopped)
        if rep.steps == 0:
            break
    return out
