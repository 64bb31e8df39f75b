"""Step-by-step comparison of the oracle with llama.cpp: one apply, a stateful stream, a chain.

Every step is judged by ``legal.legal_for`` + ``judge.check``. A step where llama.cpp's answer
is legal but not identical (a tie or a float32 boundary went the other way) is a *legal
divergence*: streams whose state does not depend on their own selection (fed histories, dist's
RNG) continue in lockstep; the others stop there and say so. A step inside a recorded finding's
domain stops the stream and names the finding.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass, field

import numpy as np

from oracle.candidates import TokenDataArray, identity_ids
from oracle.chain import SamplingParams, default_chain
from properties.peers import llama_cpp as peer
from properties.peers.judge import FindingDomain, Verdict, check
from properties.peers.legal import Drift, legal_for
from properties.peers.records import PeerRecord, peer_members
from properties.samplers.strategies import make_logits

P_SENTINEL = 0.5  # input p: a sampler that must leave p stale leaves exactly this
SELF_STATE = {"mirostat", "mirostat-v2", "adaptive-p"}  # state follows their own selection


class PeerMismatch(AssertionError):
    pass


@dataclass
class StreamReport:
    steps: int = 0
    identical: int = 0
    divergences: list = field(default_factory=list)  # steps where llama.cpp legally differed somewhere
    token_differences: int = 0  # chains: steps where the final token differed (a legal tie or boundary)
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


def single_apply(record: PeerRecord, params: dict, x32: np.ndarray) -> Verdict:
    n = x32.size
    o, q = record.oracle(params, n), record.peer(params, n)
    with q:
        for t in params.get("history", ()):
            o.accept(t)
            q.accept(t)
        verdict, _ = judge_step(o, q, raw_state(x32), Drift(), "apply")
    return verdict


def stream(record: PeerRecord, params: dict, family: str, vocab: int, seed: int, steps: int) -> StreamReport:
    """``steps`` apply/accept rounds on fresh logits each round; fed samplers accept a fixed
    small-alphabet token stream, selecting ones accept llama.cpp's token (on both sides)."""
    o, q = record.oracle(params, vocab), record.peer(params, vocab)
    fed = np.random.default_rng(seed).integers(0, min(vocab, 6), steps)
    rep, drift = StreamReport(), Drift()
    with q:
        for t in range(steps):
            cur = raw_state(make_logits(family, vocab, seed * 7919 + t))
            try:
                verdict, out = judge_step(o, q, cur, drift, f"step {t}")
            except FindingDomain as f:
                rep.stopped = f"finding {f.args[0]} at step {t}"
                break
            rep.add(verdict)
            token = int(out.ids[out.selected]) if record.stream == "own" else int(fed[t])
            o.accept(token)
            q.accept(token)
            if not verdict.identical:
                rep.divergences.append(t)
                if o.name in SELF_STATE:
                    rep.stopped = f"legal divergence at step {t} (state follows the selection)"
                    break
    return rep


def chain_stream(params: SamplingParams, family: str, vocab: int, seed: int, steps: int) -> StreamReport:
    """``default_chain`` end to end vs llama.cpp's chain (chain_init/chain_add) on the same logits;
    a shadow copy of both, applied stage by stage, says whether a differing token is legal."""
    e2e_oracle = default_chain(params, vocab)
    shadow_oracle = default_chain(params, vocab)
    shadow_peer = peer_members(params, vocab)
    drifts = [Drift() for _ in shadow_peer]
    rep = StreamReport()
    with peer.chain(peer_members(params, vocab)) as llama_chain:
        for t in range(steps):
            x = make_logits(family, vocab, seed * 7919 + t)
            token = llama_chain.sample(x)
            cur, same, verdicts = raw_state(x, p=0.0), True, []
            try:
                for i, (om, pm, d) in enumerate(zip(shadow_oracle.members, shadow_peer, drifts)):
                    verdict, out = judge_step(om, pm, cur, d, f"step {t} stage {i}")
                    verdicts.append(verdict)
                    same &= verdict.identical
                    cur = state_of(out, vocab)
            except FindingDomain as f:
                rep.stopped = f"finding {f.args[0]} at step {t}"
                break
            shadow_token = int(cur.ids[cur.selected])
            if shadow_token != token:
                raise PeerMismatch(f"step {t}: llama.cpp's chain picked {token}, its samplers one by one {shadow_token}")
            e2e = TokenDataArray.from_logits(x.astype(np.float64))
            e2e_oracle.apply(e2e)
            rep.add(Verdict(True, "", same, max(v.p_ratio for v in verdicts), max(v.logit_ratio for v in verdicts)))
            for smp in (e2e_oracle, shadow_oracle, *shadow_peer):
                smp.accept(token)
            rep.token_differences += int(e2e.selected_token != token)
            if same and e2e.selected_token != token and x[e2e.selected_token] != x[token]:
                raise PeerMismatch(f"step {t}: oracle chain picked {e2e.selected_token}, llama.cpp {token}, "
                                   "although every stage agreed (up to ties)")
            if not same:
                rep.divergences.append(t)
                if any(m.name in SELF_STATE and not v.identical for m, v in zip(shadow_oracle.members, verdicts)):
                    rep.stopped = f"legal divergence at step {t} in a self-state sampler"
                    break
                e2e_oracle = copy.deepcopy(shadow_oracle)  # resync: its RNGs drew as llama.cpp's did
    for pm in shadow_peer:
        pm.free()
    return rep
