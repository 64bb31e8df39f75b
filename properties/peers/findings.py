"""What llama.cpp (llama-cpp-python 0.3.36, x86-64, libstdc++) does where the oracle does not,
and a few behaviours where they agree that the oracle once assumed rather than checked.

Each finding carries a minimal witness and replays it against the real llama.cpp and the oracle;
``test_finding_still_reproduces`` asserts both recorded outputs still occur, so an upstream fix
(or an oracle change) shows up as a failure that names the finding.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from oracle import samplers as s
from oracle.candidates import TokenDataArray
from properties.peers import llama_cpp as peer

NEG_INF = float("-inf")


def _oracle_apply(smp, logits) -> TokenDataArray | str:
    cur = TokenDataArray.from_logits(np.asarray(logits, dtype=np.float64))
    try:
        smp.apply(cur)
    except ValueError as exc:
        return f"ValueError: {exc}"
    return cur


def _peer_apply(smp: peer.PeerSampler, logits) -> peer.PeerOutput:
    with smp:
        return smp.apply(np.asarray(logits, dtype=np.float32))


@dataclass(frozen=True)
class Finding:
    id: str
    sampler: str
    kind: str  # "llama.cpp behaviour" (the oracle deliberately differs) | "agreement" (checked, both agree)
    description: str
    witness: str
    llama_output: dict
    oracle_output: dict
    replay: Callable[[], tuple[dict, dict]] = field(repr=False, compare=False)

    def row(self) -> dict:
        return {"id": self.id, "sampler": self.sampler, "kind": self.kind, "description": self.description,
                "witness": self.witness, "llama.cpp": self.llama_output, "oracle": self.oracle_output}


def _typical_nan():
    x = [0.0, NEG_INF, 1.0, 2.0, -1.0, 0.5]
    q = _peer_apply(peer.typical(0.5, 0), x)
    o = _oracle_apply(s.typical(0.5, 0), x)
    return {"ids": q.ids.tolist()}, {"ids": o.ids.tolist()}


def _typical_nan_large():
    x = np.linspace(2, -2, 17).astype(np.float32)
    x[8] = NEG_INF
    q = _peer_apply(peer.typical(0.5, 0), x)
    o = _oracle_apply(s.typical(0.5, 0), x)
    return {"ids": q.ids.tolist()}, {"ids": o.ids.tolist()}


def _mirostat_overflow():
    x = [0.0, 0.0, 0.0, 0.0]
    q = _peer_apply(peer.mirostat(4, 0, 5.0, 0.1, 100), x)
    smp = s.mirostat(4, 0, 5.0, 0.1, 100)
    o = _oracle_apply(smp, x)
    return {"size": int(q.ids.size)}, {"size": o.size, "k": repr(smp.k)}


def _greedy_no_finite():
    x = [NEG_INF] * 4
    q = _peer_apply(peer.greedy(), x)
    return {"selected": q.selected}, {"result": _oracle_apply(s.greedy(), x)}


def _dist_no_finite():
    x = [NEG_INF] * 4
    q = _peer_apply(peer.dist(0), x)
    return ({"selected": q.selected, "p_is_nan": bool(np.isnan(q.p).all())},
            {"result": _oracle_apply(s.dist(0), x)})


def _softmax_float_sum():
    x = np.zeros(262144)
    x[0] = 12.0
    q = _peer_apply(peer.top_p(0.5, 0), x)
    o = _oracle_apply(s.top_p(0.5, 0), x)
    return {"p_top": round(float(q.p[0]), 6)}, {"p_top": round(float(o.p[0]), 6)}


def _rounded(values) -> list[float]:
    return (np.round(np.asarray(values, dtype=np.float64), 4) + 0.0).tolist()


def _dry_testing_disabled():
    # multiplier 0, and a negative last_n (which disables DRY in this build as 0 does)
    statuses = [peer.crash_witness_dry_testing_disabled(m, n) for m, n in ((0.0, 64), (1.0, -1))]
    names = {s.dry(m, 1.75, 2, n, [[1]]).name for m, n in ((0.0, 64), (1.0, -1))}
    # SIGSEGV or SIGABRT (glibc catching the heap corruption) depending on the heap's state
    return {"killed_by_signal": all(st < 0 for st in statuses)}, {"sampler": "?dry" if names == {"?dry"} else sorted(names)}


def _bucket_overflow():
    x = np.zeros(300)
    x[5], x[7] = 1e9, 3e8
    q = _peer_apply(peer.top_k(129), x)
    o = _oracle_apply(s.top_k(129), x)
    return ({"first": int(q.ids[0]), "token_5_kept": bool((q.ids == 5).any())},
            {"first": int(o.ids[0]), "token_5_kept": bool((o.ids == 5).any())})


def _sigma_overflow():
    x = [3e19, 0.0, 0.0, 0.0]
    q = _peer_apply(peer.top_n_sigma(1.0), x)
    o = _oracle_apply(s.top_n_sigma(1.0), x)
    return {"masked": np.flatnonzero(np.isneginf(q.logits)).tolist()}, \
        {"masked": np.flatnonzero(np.isneginf(o.logits)).tolist()}


def _picks(smp, first, n=4) -> list[int]:
    """Selected index after applying to ``first`` then ``n`` times to 256 zero logits."""
    if first is not None:
        smp.apply(first)
    return [int(smp.apply(np.zeros(256, dtype=np.float32)).selected) for _ in range(n)]


def _oracle_picks(smp, first, n=4) -> list[int]:
    if first is not None:
        smp.apply(TokenDataArray.from_logits(np.asarray(first, dtype=np.float64)))
    out = []
    for _ in range(n):
        cur = TokenDataArray.from_logits(np.zeros(256))
        smp.apply(cur)
        out.append(int(cur.selected))
    return out


def _dist_singleton_draw():
    with peer.dist(4242) as a, peer.dist(4242) as b:
        llama = _picks(a, np.zeros(1, np.float32)) == _picks(b, np.zeros(2, np.float32))
    oracle = _oracle_picks(s.dist(4242), [0.0]) == _oracle_picks(s.dist(4242), [0.0, 0.0])
    return {"one_candidate_draws": llama}, {"one_candidate_draws": oracle}


def _discrete_singleton():
    with peer.adaptive_p(-1.0, 0.9, 4242) as a, peer.adaptive_p(-1.0, 0.9, 4242) as b:
        llama = _picks(a, np.zeros(1, np.float32)) == _picks(b, None)
    oracle = _oracle_picks(s.adaptive_p(-1.0, 0.9, 4242), [0.0]) == _oracle_picks(s.adaptive_p(-1.0, 0.9, 4242), None)
    return {"one_candidate_draws_none": llama}, {"one_candidate_draws_none": oracle}


def _adaptive_accept_other():
    x = np.log(np.array([0.5, 0.3, 0.2], dtype=np.float32))
    with peer.adaptive_p(0.5, 0.9, 1) as a:
        first = a.apply(x)
        a.accept((int(first.ids[first.selected]) + 1) % 3)  # not the token it selected
        llama = _rounded(a.apply(x).logits)
    o = s.adaptive_p(0.5, 0.9, 1)
    cur = TokenDataArray.from_logits(x.astype(np.float64))
    o.apply(cur)
    o.accept((int(cur.selected_token) + 1) % 3)
    cur = TokenDataArray.from_logits(x.astype(np.float64))
    o.apply(cur)
    return {"second_logits": llama}, {"second_logits": _rounded(cur.logits)}


def _adaptive_target_clamp():
    x = np.log(np.array([0.6, 0.3, 0.1], dtype=np.float32))
    with peer.adaptive_p(1.25, 0.5, 1) as a:
        llama = _rounded(a.apply(x).logits)
    cur = TokenDataArray.from_logits(x.astype(np.float64))
    s.adaptive_p(1.25, 0.5, 1).apply(cur)
    return {"logits": llama}, {"logits": _rounded(cur.logits)}


def _stale_sorted():
    x = [1.0, 1.0, 1.0]
    q = _peer_apply(peer.chain([peer.top_k(3), peer.logit_bias(3, {1: 0.5}), peer.top_k(1)]), x)
    cur = TokenDataArray.from_logits(np.asarray(x))
    for smp in (s.top_k(3), s.logit_bias(3, {1: 0.5}), s.top_k(1)):
        smp.apply(cur)
    return {"ids": q.ids.tolist()}, {"ids": cur.ids.tolist()}


def _repeated_bias():
    x = [0.0, 1.0, 2.0, 3.0]
    biases = [(3, 0.5), (3, 1.0)]
    q = _peer_apply(peer.chain([peer.top_k(4), peer.logit_bias(4, biases)]), x)
    cur = TokenDataArray.from_logits(np.asarray(x))
    for smp in (s.top_k(4), s.logit_bias(4, biases)):
        smp.apply(cur)
    return ({"logit_3": float(q.logits[list(q.ids).index(3)])},
            {"logit_3": float(cur.logits[list(cur.ids).index(3)])})


FINDINGS: list[Finding] = [
    Finding("logit-bias-repeated-token-searched", "logit_bias", "llama.cpp behaviour",
            "A token listed more than once in the bias list gets the sum of its entries only while the "
            "array is in vocabulary order (data[t].id == t); after any sampler that sorts or truncates, "
            "llama.cpp searches the array and its inner loop breaks at the token's first entry, so only "
            "that entry is added. Found by the generated-chain differential (nightly, seed 0: "
            "top_n_sigma -> typical -> logit_bias with [(3, 0.0), (3, 1.0)]). The oracle adds every entry, "
            "as llama.cpp does in vocabulary order.",
            "chain top_k(4) -> logit_bias([(3, +0.5), (3, +1.0)]) on logits [0, 1, 2, 3]",
            {"logit_3": 3.5}, {"logit_3": 4.5}, _repeated_bias),
    Finding("logit-bias-stale-sorted", "logit_bias", "llama.cpp behaviour",
            "logit_bias changes logits but leaves cur_p->sorted = true, so a later top_k / top_p / min_p "
            "trusts the stale order and keeps the wrong tokens. common_sampler puts logit_bias first, so "
            "only custom chains hit it (and the truncation ≡ masking property found it). The oracle "
            "invalidates the order, as every other logit-changing sampler does.",
            "chain top_k(3) -> logit_bias({1: +0.5}) -> top_k(1) on logits [1, 1, 1]",
            {"ids": [0]}, {"ids": [1]}, _stale_sorted),
    Finding("typical-nan-entropy", "typical", "llama.cpp behaviour",
            "typical sums -p·logf(p) with no p > 0 guard. One p = 0 (a -inf logit, e.g. after top_n_sigma, "
            "logit_bias or a grammar; or expf underflow below e^-104) makes the entropy NaN, every "
            "typicality score NaN. Up to 16 candidates libstdc++'s std::sort is an insertion sort, which "
            "leaves NaN keys in the order softmax sorted them, so 'typical' keeps the most probable tokens "
            "until the mass exceeds p (here: only the top token); above 16 see typical-nan-entropy-scrambled. "
            "The oracle takes 0·ln 0 = 0 and keeps the locally typical tokens.",
            "typical(p=0.5, min_keep=0) on logits [0, -inf, 1, 2, -1, 0.5]",
            {"ids": [3]}, {"ids": [2, 3]}, _typical_nan),
    Finding("typical-nan-entropy-scrambled", "typical", "llama.cpp behaviour",
            "The NaN entropy of typical-nan-entropy on more than 16 candidates: std::sort's introsort "
            "partitions on NaN keys, the order it leaves is neither the softmax nor a typicality order, and "
            "typical keeps mostly the LEAST probable tokens (here 14 of 17, the -inf one among them, "
            "starting with tokens 9, 8, 16; token id = probability rank in this row). The 'degrades to top-p' description holds only up to 16 candidates "
            "(found by the generated-chain differential: typical after a backend filter that masks).",
            "typical(p=0.5, min_keep=0) on 17 logits linspace(2, -2), -inf at token 8",
            {"ids": [9, 8, 16, 15, 14, 13, 12, 11, 10, 0, 7, 6, 5, 4]}, {"ids": [3, 4, 2, 5, 1]}, _typical_nan_large),
    Finding("mirostat-k-overflow", "mirostat", "llama.cpp behaviour",
            "mirostat v1 computes k in float; with (nearly) flat top-m probabilities s_hat -> 0 and "
            "k = inf (or >= 2^31, or NaN once two p are 0). int(k) is undefined there; x86-64 yields "
            "INT_MIN, so top_k(max(INT_MIN, 1)) keeps ONE token and mirostat v1 silently turns greedy. "
            "The oracle keeps min(k, size) tokens (the intent; ARM's saturating conversion agrees).",
            "mirostat(n_vocab=4, seed=0, tau=5, eta=0.1, m=100) on logits [0, 0, 0, 0]",
            {"size": 1}, {"size": 4, "k": "inf"}, _mirostat_overflow),
    Finding("bucket-sort-int-overflow", "top_k (k > 128) and every sort of > 128 candidates", "llama.cpp behaviour",
            "llama.cpp's bucket sort puts a logit in bucket int(6.4f·logit + 64), clamped to [0, 127]. From "
            "logit ~3.36e8 on the float -> int conversion overflows (undefined; x86-64 gives INT_MIN), the "
            "clamp sends the token to the LOWEST bucket, and the largest logits sort last: top_k(k > 128) "
            "drops them, and softmax-with-sort (top_p, typical, xtc, mirostat, temp_ext, min_p's fallback) "
            "orders them last. The oracle sorts by value.",
            "top_k(129) on 300 logits: 0 everywhere, 1e9 at token 5, 3e8 at token 7",
            {"first": 7, "token_5_kept": False}, {"first": 5, "token_5_kept": True}, _bucket_overflow),
    Finding("top-n-sigma-variance-overflow", "top_n_sigma", "llama.cpp behaviour",
            "top_n_sigma accumulates the squared deviations in a float: beyond |logit - mean| ~ 1.8e19 the "
            "sum overflows to inf, std = inf, the threshold max - n·std = -inf and nothing is masked. The "
            "oracle's float64 variance masks as specified.",
            "top_n_sigma(1.0) on logits [3e19, 0, 0, 0]",
            {"masked": []}, {"masked": [1, 2, 3]}, _sigma_overflow),
    Finding("greedy-no-finite-logit", "greedy", "llama.cpp behaviour",
            "greedy on an array with no finite logit returns index 0 (a -inf token); the oracle raises.",
            "greedy() on logits [-inf, -inf, -inf, -inf]",
            {"selected": 0}, {"result": "ValueError: greedy: no candidate with a finite logit to select"},
            _greedy_no_finite),
    Finding("dist-no-finite-logit", "dist", "llama.cpp behaviour",
            "dist on an array with no finite logit computes expf(-inf - -inf) = NaN, never reaches its "
            "target and falls back to the last index, leaving every p NaN; the oracle raises.",
            "dist(seed=0) on logits [-inf, -inf, -inf, -inf]",
            {"selected": 3, "p_is_nan": True},
            {"result": "ValueError: dist: no candidate with a finite logit to select"}, _dist_no_finite),
    Finding("softmax-float-running-sum", "top_p (softmax_impl)", "llama.cpp behaviour",
            "softmax_impl accumulates the normaliser in one float running sum: adding 262,143 terms of "
            "6.1e-6 to a sum near 2 rounds the same way every time, so p of the top token comes out "
            "0.55% low. Within the float32 model the judge states (float_model.seq_sum_bound), but far "
            "beyond the 1e-6 p agreement asked of a sampler; top_p / typical / xtc / mirostat decisions "
            "at 262k vocabularies inherit it.",
            "top_p(p=0.5, min_keep=0) on 262,144 logits: 12 at token 0, 0 elsewhere",
            {"p_top": 0.380953}, {"p_top": 0.383045}, _softmax_float_sum),
    Finding("dry-testing-disabled-segfault", "dry", "llama.cpp behaviour",
            "llama_sampler_init_dry_testing (the token-breaker entry point test-sampling.cpp uses) calls "
            "llama_sampler_init_dry, which returns the no-op '?dry' sampler for disabling parameters "
            "(multiplier 0, base < 1, last_n <= 0: a negative last_n disables DRY in this version), then casts that sampler's context to a DRY context and "
            "clears its breaker map: the process dies (SIGSEGV or SIGABRT). The oracle returns the no-op "
            "sampler. The adapter routes disabled DRY through llama_sampler_init_dry instead.",
            "llama_sampler_init_dry_testing(0.0, 1.75, 2, 64, {{1}}) and (1.0, 1.75, 2, -1, {{1}}), each in a child process",
            {"killed_by_signal": True}, {"sampler": "?dry"}, _dry_testing_disabled),
    Finding("dist-one-candidate-draws", "dist", "agreement",
            "dist with a single candidate still consumes one uniform draw (so streams stay aligned); "
            "the oracle does the same.",
            "dist(4242) on [0] then 4x on 256 zeros, vs dist(4242) on [0, 0] then the same",
            {"one_candidate_draws": True}, {"one_candidate_draws": True}, _dist_singleton_draw),
    Finding("discrete-one-candidate-no-draw", "mirostat / mirostat_v2 / adaptive_p", "agreement",
            "std::discrete_distribution over a single weight returns 0 without drawing (libstdc++); the "
            "oracle's Mt19937.discrete does the same.",
            "adaptive_p(-1, 0.9, 4242) on [0] then 4x on 256 zeros, vs a fresh one on 256 zeros",
            {"one_candidate_draws_none": True}, {"one_candidate_draws_none": True}, _discrete_singleton),
    Finding("adaptive-p-accept-other-token", "adaptive_p", "agreement",
            "adaptive-p moves its EMA only when the accepted token is the one it selected. ORACLE FIXED: "
            "it used to update on any accept.",
            "adaptive_p(0.5, 0.9, 1): apply to ln[0.5, 0.3, 0.2], accept a different token, apply again",
            {"second_logits": [5.0, 2.3333, 0.0]}, {"second_logits": [5.0, 2.3333, 0.0]}, _adaptive_accept_other),
    Finding("adaptive-p-target-clamp", "adaptive_p", "agreement",
            "adaptive-p clamps the target to [0, 1] where it forms the adapted target, while the EMA "
            "starts from the unclamped target/(1 - decay). ORACLE FIXED: it used the unclamped target.",
            "adaptive_p(1.25, 0.5, 1) on ln[0.6, 0.3, 0.1]",
            {"logits": [3.3333, -4.0, -9.8246]}, {"logits": [3.3333, -4.0, -9.8246]}, _adaptive_target_clamp),
]

# the backend (ggml-graph) samplers' findings, replayed the same way (witnesses as data there)
from properties.peers.backend_findings import BACKEND_FINDINGS  # noqa: E402

FINDINGS += [Finding(**spec) for spec in BACKEND_FINDINGS]


def table() -> list[dict]:
    return [f.row() for f in FINDINGS]
