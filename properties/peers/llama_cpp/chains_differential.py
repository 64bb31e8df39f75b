"""The CPU-sampler differential in breadth: generated chains of every llama.cpp sampler, and long
seeded streams of every stateful one, judged step by step against the oracle.

A generated chain is any sequence of the non-selecting samplers (repeats allowed, so a stateful
penalties / DRY may follow a top_k that reordered and compacted the array) closed by one selector,
each with parameters from its record's llama.cpp facet (no-op points, zero and negative values, empty and
repeated bias / breaker lists). ``generated_chain_stream`` runs it as llama.cpp's chain
(``chain_init``/``chain_add``, ``llama_sampler_sample``) and, stage by stage, llama.cpp's members
against the oracle's with ``legal.legal_for`` + ``judge.check``; the end-to-end oracle chain must
pick the same token unless a stage legally differed (a tie or a float32 boundary).

``chain_stream`` is the special case of the chain ``common_sampler_init`` builds from
``SamplingParams`` (``params_chain``).

``long_streams`` judges >= ``steps`` apply/accept rounds of every stateful sampler, in lockstep
on one row sequence (a row is generated, and sorted, once per step for all of them). A self-state
sampler (mirostat, mirostat_v2, adaptive_p) stops at its first legal divergence (its state then
follows a different selection) and restarts with fresh state on the next row, until ``steps``
rounds are judged; the report keeps where each divergence happened - the measurement behind the
"identical for N steps" statements of docs/findings.md.
"""
from __future__ import annotations

import contextlib
import copy
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np
from hypothesis import assume, strategies as st

from oracle.candidates import TokenDataArray
from oracle.chain import Chain, SamplingParams, default_chain
from properties.peers.llama_cpp import adapter as peer
from properties.peers.legality import FindingDomain, Unsupported, Verdict
from properties.peers.llama_cpp.legal import Drift
from properties.peers.llama_cpp.streams import (PeerMismatch, Stream, StreamReport, judge_step, raw_state,
                                      state_of)
from properties.samplers.record import SamplerRecord
from properties.samplers.records import RECORDS, RECORDS_BY_NAME
from properties.samplers.strategies import make_logits

_PEER = [r for r in RECORDS if r.llama is not None]
MEMBERS = tuple(r.name for r in _PEER if r.kind != "select")
SELECTORS = tuple(r.name for r in _PEER if r.kind == "select")
STATEFUL = tuple(r.name for r in _PEER if r.llama.stream_params is not None)


@dataclass
class GeneratedChain:
    members: list  # [(SamplerRecord, constructor params)], the selector last
    history: list = field(default_factory=list)

    def __repr__(self) -> str:
        return " -> ".join(f"{r.name}{ {k: v for k, v in p.items() if k != 'history'} }" for r, p in self.members)

    @property
    def families(self) -> tuple[str, ...]:
        allowed = set(self.members[0][0].llama.families)
        for r, _ in self.members[1:]:
            allowed &= set(r.llama.families)
        return tuple(f for f in self.members[-1][0].llama.families if f in allowed)


@st.composite
def generated_chains(draw, vocab: int, max_members: int = 5) -> GeneratedChain:
    names = draw(st.lists(st.sampled_from(MEMBERS), max_size=max_members), label="members")
    names.append(draw(st.sampled_from(SELECTORS), label="selector"))
    members = [(RECORDS_BY_NAME[n], draw(RECORDS_BY_NAME[n].llama.params(vocab), label=n)) for n in names]
    history = draw(st.lists(st.integers(0, min(vocab, 6) - 1), max_size=12), label="history")
    chain = GeneratedChain(members, history)
    assume(chain.families)  # e.g. mirostat (zipf rows only) after typical (no underflowing rows)
    return chain


def _build(chain: GeneratedChain, vocab: int) -> tuple[list, list]:
    oracle = [r.build(p, vocab) for r, p in chain.members]
    llama = [r.llama.peer(p, vocab) for r, p in chain.members]
    for smp in (*oracle, *llama):
        for t in chain.history:
            smp.accept(int(t))
    return oracle, llama


def generated_chain_stream(chain: GeneratedChain, family: str, vocab: int, seed: int, steps: int,
                           e2e: Chain | None = None) -> StreamReport:
    """``steps`` rounds of llama.cpp's chain on fresh rows, every stage judged against the oracle;
    ``e2e`` is the oracle chain judged end to end (default: the chain's own oracle members)."""
    e2e = e2e if e2e is not None else Chain(_build(chain, vocab)[0])
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
                    selector_in = cur
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
                if not _float_boundary(verdicts, selector_in, whole.selected_token, token):
                    raise PeerMismatch(f"step {t}: the oracle chain picked {whole.selected_token}, llama.cpp {token}, "
                                       "although every stage agreed (up to ties) and none had a float32 boundary")
                rep.boundary_flips += 1
            for smp in (e2e, *shadow_oracle, *shadow_llama):
                smp.accept(token)
            if not same:
                rep.divergences.append(t)
                if any(r.llama.self_state and not v.identical for (r, _), v in zip(chain.members, verdicts)):
                    rep.stopped = f"legal divergence at step {t} in a self-state sampler"
                    break
                e2e = Chain(copy.deepcopy(shadow_oracle))  # its RNGs drew as llama.cpp's did
    finally:
        real.free()
        for pm in shadow_llama:
            pm.free()
    return rep


def _float_boundary(verdicts: list[Verdict], selector_in: TokenDataArray, e2e_token: int, token: int) -> bool:
    """Whether the float64 chain's different pick is one a float32 path may legally make: a filter
    stage's legal set admitted another survivor set, the float32 stages made the two tokens tie
    where the selector compared them (x / t rounding two near-tied logits to one float), or the
    selector's draw sits within the float error of a CDF boundary with ``e2e_token`` on the
    other side."""
    *filters, selector = verdicts
    if any(v.ambiguous for v in filters):
        return True
    at = {int(i): float(l) for i, l in zip(selector_in.ids, selector_in.logits) if int(i) in (e2e_token, token)}
    if len(at) == 2 and at[e2e_token] == at[token]:
        return True
    return selector.selectable is not None and e2e_token in selector.selectable


def params_chain(params: SamplingParams, vocab: int) -> GeneratedChain:
    """The chain ``common_sampler_init`` builds for ``params`` (``oracle.chain.default_chain``'s
    members and order), as a generated chain of peer records."""
    p, r = params, RECORDS_BY_NAME
    members = [(r["logit_bias"], {"biases": list(p.logit_bias)})] if p.logit_bias else []
    if p.mirostat == 1:
        return GeneratedChain(members + [(r["temp"], {"t": p.temp}), (r["mirostat"], {
            "seed": p.seed, "tau": p.mirostat_tau, "eta": p.mirostat_eta, "m": 100})])
    if p.mirostat == 2:
        return GeneratedChain(members + [(r["temp"], {"t": p.temp}), (r["mirostat_v2"], {
            "seed": p.seed, "tau": p.mirostat_tau, "eta": p.mirostat_eta})])
    by_letter = {rec.llama.letter: rec for rec in RECORDS if rec.llama is not None and rec.llama.letter}
    unknown = set(p.sequence) - set(by_letter)
    if unknown:
        raise ValueError(f"unknown sampler letters {sorted(unknown)} in sequence {p.sequence!r}")
    members += [(by_letter[c], by_letter[c].llama.settings(p)) for c in p.sequence]
    return GeneratedChain(members + [(r["dist"], {"seed": p.seed})])


def chain_stream(params: SamplingParams, family: str, vocab: int, seed: int, steps: int) -> StreamReport:
    """``default_chain`` end to end vs llama.cpp's chain (chain_init/chain_add) on the same rows:
    ``generated_chain_stream`` on the chain ``common_sampler_init`` builds, ``default_chain`` judged
    end to end."""
    return generated_chain_stream(params_chain(params, vocab), family, vocab, seed, steps,
                                  e2e=default_chain(params, vocab))


@dataclass
class LongStream:
    steps: int = 0
    identical: int = 0
    streams: int = 0
    first_divergence: list = field(default_factory=list)  # per stream: the step of its first legal divergence
    stops: list = field(default_factory=list)


def long_streams(samplers: dict[str, tuple[SamplerRecord, dict]], family: str, vocab: int, seed: int,
                 steps: int, workers: int | None = None) -> dict[str, LongStream]:
    """>= ``steps`` judged rounds of every named stateful sampler, in lockstep on one row sequence
    (each row generated, and sorted, once for all of them). A stream that stops (a self-state
    sampler's legal divergence, a finding's domain) restarts on the next row with fresh state and
    its seed + 1; rows continue until every sampler has ``steps`` judged rounds.

    The streams of one row are judged on ``workers`` threads (default: one per CPU): llama.cpp's
    calls and NumPy's large loops release the GIL, and each stream owns its samplers and state,
    so the result does not depend on the scheduling."""
    out = {name: LongStream() for name in samplers}
    live: dict[str, tuple[Stream, int]] = {}

    def judged(name: str) -> int:
        return out[name].steps + (live[name][0].report.steps if name in live else 0)

    def step(name: str, t: int, cur: TokenDataArray) -> bool:
        stream_, start = live[name]
        return stream_.step(t - start, cur)

    n_workers = max(1, min(len(samplers), workers or os.cpu_count() or 1))
    pool = ThreadPoolExecutor(max_workers=n_workers) if n_workers > 1 else None
    try:
        with pool or contextlib.nullcontext():
            for t in range(2 * steps):  # a stop on an unjudged row costs that row: never more than one each
                short = [name for name in samplers if judged(name) < steps]
                if not short:
                    break
                cur = raw_state(make_logits(family, vocab, seed * 7919 + t))
                cur.descending()  # once, before the threads share the row
                for name in short:
                    if name not in live:
                        record, params = samplers[name]
                        k = out[name].streams
                        p = {**params, "seed": params["seed"] + k} if "seed" in params else params
                        live[name] = (Stream(record, p, vocab, seed + k, steps + 1), t)
                        out[name].streams += 1
                going = list((pool.map if pool else map)(lambda name: step(name, t, cur), short))
                for name, ok in zip(short, going):
                    if not ok:
                        _close(out[name], live.pop(name)[0])
    finally:
        for name in list(live):
            _close(out[name], live.pop(name)[0])
    return out


def _close(acc: LongStream, s: Stream) -> None:
    rep = s.report
    acc.steps += rep.steps
    acc.identical += rep.identical
    if rep.divergences:
        acc.first_divergence.append(rep.divergences[0])
    if rep.stopped:
        acc.stops.append(rep.stopped)
    s.free()
