"""Step-by-step comparison of the oracle with llama.cpp: one apply, a stateful stream (chains
are in ``chains_differential``).

Every step is judged by ``legal.legal_for`` + ``judge.check``. A step where llama.cpp's answer
is legal but not identical (a tie or a float32 boundary went the other way) is a *legal
divergence*: streams whose state does not depend on their own selection (fed histories, dist's
RNG) continue in lockstep; the others stop there and say so. A step inside a recorded finding's
domain stops the stream and names the finding.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from oracle.candidates import TokenDataArray, identity_ids
from properties.peers.llama_cpp import adapter as peer
from properties.peers.legality import FindingDomain, Verdict, check
from properties.peers.llama_cpp.legal import Drift, legal_for
from properties.samplers.record import SamplerRecord
from properties.samplers.strategies import make_logits

P_SENTINEL = 0.5  # input p: a sampler that must leave p stale leaves exactly this


class PeerMismatch(AssertionError):
    pass


@dataclass
class StreamReport:
    steps: int = 0
    identical: int = 0
    divergences: list = field(default_factory=list)  # steps where llama.cpp legally differed somewhere
    token_differences: int = 0  # chains: steps where the final token differed (a legal tie or boundary)
    boundary_flips: int = 0  # chains: of those, float32 boundaries (the rest are ties)
    stopped: str = ""
    worst_p_ratio: float = 0.0
    worst_logit_ratio: float = 0.0

    def add(self, v: Verdict) -> None:
        self.steps += 1
        self.identical += v.identical
        self.worst_p_ratio = max(self.worst_p_ratio, v.p_ratio)
        self.worst_logit_ratio = max(self.worst_logit_ratio, v.logit_ratio)


def raw_state(x32: np.ndarray, p: float = P_SENTINEL) -> TokenDataArray:
    """The array both sides start from: ids 0..n-1, the float32 logits, a sentinel p."""
    n = x32.size
    return TokenDataArray(identity_ids(n), x32.astype(np.float64), np.full(n, p), n_vocab=n)


def state_of(out: peer.PeerOutput, n_vocab: int) -> TokenDataArray:
    return TokenDataArray(out.ids.copy(), out.logits.astype(np.float64), out.p.astype(np.float64),
                          out.sorted, out.selected, n_vocab)


def judge_step(oracle_smp, peer_smp: peer.PeerSampler, cur: TokenDataArray, drift: Drift, where: str):
    """Apply both to ``cur``; raise PeerMismatch on an illegal answer, else (verdict, peer output)."""
    out = peer_smp.apply(cur)
    legal = legal_for(oracle_smp, cur, drift)
    # the oracle must itself be one of the legal answers (the legal set is derived from llama.cpp's
    # float32 arithmetic, so this is what judges the oracle), and llama.cpp must be one too
    o = legal.oracle
    as_output = peer.PeerOutput(o.ids, o.logits.astype(np.float32), o.p, o.selected, o.sorted)
    own = check(legal, cur, as_output)
    if not own.ok:
        raise PeerMismatch(f"{where}: the oracle's {oracle_smp.name} answer is not a legal llama.cpp answer: {own.why}")
    verdict = check(legal, cur, out)
    if not verdict.ok:
        raise PeerMismatch(f"{where}: llama.cpp {peer_smp.name}: {verdict.why}")
    return verdict, out


def single_apply(record: SamplerRecord, params: dict, x32: np.ndarray) -> Verdict:
    n = x32.size
    o, q = record.build(params, n), record.llama.peer(params, n)
    with q:
        for t in params.get("history", ()):
            o.accept(t)
            q.accept(t)
        verdict, _ = judge_step(o, q, raw_state(x32), Drift(), "apply")
    return verdict


class Stream:
    """One stateful sampler judged apply/accept round by round (oracle, llama.cpp, drift bound).
    Fed samplers accept a fixed small-alphabet token stream, selecting ones accept llama.cpp's
    token (on both sides). Rows come from the caller, so several streams can share one row."""

    def __init__(self, record: SamplerRecord, params: dict, vocab: int, seed: int, steps: int) -> None:
        self.record, self.report, self.drift = record, StreamReport(), Drift()
        self.oracle, self.peer = record.build(params, vocab), record.llama.peer(params, vocab)
        self.fed = np.random.default_rng(seed).integers(0, min(vocab, 6), steps)

    def step(self, t: int, cur: TokenDataArray) -> bool:
        """Judge round ``t`` on ``cur`` (left unchanged); False once the stream has stopped."""
        rep = self.report
        try:
            verdict, out = judge_step(self.oracle, self.peer, cur, self.drift, f"step {t}")
        except FindingDomain as f:
            rep.stopped = f"finding {f.args[0]} at step {t}"
            return False
        rep.add(verdict)
        token = int(out.ids[out.selected]) if self.record.llama.stream == "own" else int(self.fed[t])
        self.oracle.accept(token)
        self.peer.accept(token)
        if not verdict.identical:
            rep.divergences.append(t)
            if self.record.llama.self_state:
                rep.stopped = f"legal divergence at step {t} (state follows the selection)"
                return False
        return True

    def free(self) -> None:
        self.peer.free()


def stream(record: SamplerRecord, params: dict, family: str, vocab: int, seed: int, steps: int) -> StreamReport:
    """``steps`` apply/accept rounds of ``record`` on fresh ``family`` rows (``Stream``)."""
    s = Stream(record, params, vocab, seed, steps)
    try:
        for t in range(steps):
            if not s.step(t, raw_state(make_logits(family, vocab, seed * 7919 + t))):
                break
    finally:
        s.free()
    return s.report
