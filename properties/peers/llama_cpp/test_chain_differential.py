"""The CPU-sampler differential in breadth (``chains_differential``): generated chains of every
llama.cpp sampler (the long seeded streams are in ``test_long_streams.py``, a scheduling unit of
their own).

ci: 10 generated chains x 20 steps at <= 1,000 tokens; nightly: 100 chains x 100 steps at
<= 32,000 tokens.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from properties import recording
from properties.peers.llama_cpp import adapter as peer
from properties.profiles import current_profile

_REASON = peer.available()
if _REASON is not None and _REASON.startswith("llama_cpp is not importable"):
    pytest.skip(_REASON, allow_module_level=True)

from properties.peers.llama_cpp.streams import PeerMismatch  # noqa: E402
from properties.peers.llama_cpp.chains_differential import GeneratedChain, generated_chain_stream, generated_chains  # noqa: E402
from properties.samplers.records import RECORDS_BY_NAME  # noqa: E402
from properties.samplers.strategies import vocab_sizes  # noqa: E402

pytestmark = pytest.mark.peer
NIGHTLY = current_profile() == "nightly"
CHAIN_STEPS, CHAIN_VOCAB = (100, 32000) if NIGHTLY else (20, 1000)
CHAINS: dict = {"examples": 0, "steps": 0, "identical": 0, "legal_differences": 0, "token_differences": 0, "boundary_flips": 0, "stops": {}}
recording.table("llama_cpp_generated_chains", CHAINS)

@settings(max_examples=100 if NIGHTLY else 10)
@given(data=st.data())
def test_generated_chain_matches_llama_cpp(data):
    """Any order of any samplers with any legal parameters (stateful ones after top_k's reordering
    and compaction included), closed by a selector: llama.cpp's chain token equals its members
    applied one by one, every member's answer is legal for the oracle, and the oracle chain picks
    the same token unless a member legally differed."""
    vocab = data.draw(vocab_sizes(CHAIN_VOCAB, 2), label="vocab")
    chain = data.draw(generated_chains(vocab), label="chain")
    family = data.draw(st.sampled_from(chain.families), label="family")
    rep = generated_chain_stream(chain, family, vocab, data.draw(st.integers(0, 2**16), label="seed"), CHAIN_STEPS)
    CHAINS["examples"] += 1
    for key in ("steps", "identical", "token_differences", "boundary_flips"):
        CHAINS[key] += getattr(rep, key)
    CHAINS["legal_differences"] += len(rep.divergences)
    why = rep.stopped.split(" at ")[0] or "ran all steps"
    CHAINS["stops"][why] = CHAINS["stops"].get(why, 0) + 1
    assert rep.steps == CHAIN_STEPS or rep.stopped, f"chain stopped after {rep.steps} steps without a reason"


# nightly seed 0 (hypothesis 6.155): vocab 2, two top_n_sigma(-1), then a truncation to one
# candidate (typical / top_p at p = 0), then logit_bias, then dist. The judge indexed the bias of a
# token truncated away (IndexError), and called llama.cpp's kept sorted flag illegal on an array
# that was still sorted (one candidate).
_TRUNCATED_BIAS = {
    "bias of a truncated token": (RECORDS_BY_NAME["typical"], {"p": 0.0, "min_keep": 0},
                                  [(0, 0.0), (0, 0.0), (1, 0.0)]),
    "sorted flag kept on one candidate": (RECORDS_BY_NAME["top_p"], {"p": 0.0, "min_keep": 0}, [(0, 0.0)]),
}


@pytest.mark.parametrize("name", list(_TRUNCATED_BIAS))
def test_logit_bias_after_a_truncation(name):
    """logit_bias after a sampler that truncated and sorted the array: judged for every step."""
    trunc, params, biases = _TRUNCATED_BIAS[name]
    sigma = (RECORDS_BY_NAME["top_n_sigma"], {"n": -1.0})
    chain = GeneratedChain([sigma, sigma, (trunc, params), (RECORDS_BY_NAME["logit_bias"], {"biases": biases}),
                            (RECORDS_BY_NAME["dist"], {"seed": 0})])
    rep = generated_chain_stream(chain, "peaked", 2, 0, 20)
    assert rep.steps == 20 and not rep.stopped, rep.stopped


def test_logit_bias_breaking_a_sorted_order_is_the_finding():
    """A bias that reorders a sorted array: llama.cpp keeps sorted = true (finding
    logit-bias-stale-sorted), so the stream stops there, named, instead of judging later samplers
    against an order llama.cpp does not have."""
    # the biases order the three tokens by id, descending; the rows' sorted orders vary by step
    chain = GeneratedChain([(RECORDS_BY_NAME["top_k"], {"k": 3}),
                            (RECORDS_BY_NAME["logit_bias"], {"biases": [(0, 30.0), (1, 60.0), (2, 90.0)]}),
                            (RECORDS_BY_NAME["dist"], {"seed": 0})])
    rep = generated_chain_stream(chain, "zipf", 3, 0, 5)
    assert rep.stopped.startswith("finding logit-bias-stale-sorted"), rep.stopped


def test_repeated_bias_after_a_reorder_is_the_finding():
    """Nightly seed 0's witness: top_n_sigma(-1) twice, typical(0), then logit_bias listing token 3
    twice (+0, +1) on 4 peaked tokens. Once the array is sorted, llama.cpp adds only the first
    entry (finding logit-bias-repeated-token-searched): the stream stops there, named."""
    sigma = (RECORDS_BY_NAME["top_n_sigma"], {"n": -1.0})
    chain = GeneratedChain([sigma, sigma, (RECORDS_BY_NAME["typical"], {"p": 0.0, "min_keep": 0}),
                            (RECORDS_BY_NAME["logit_bias"], {"biases": [(3, 0.0), (3, 1.0)]}),
                            (RECORDS_BY_NAME["dist"], {"seed": 0})])
    rep = generated_chain_stream(chain, "peaked", 4, 0, 20)
    assert rep.stopped.startswith("finding logit-bias-repeated-token-searched"), rep.stopped


def test_masking_boundary_is_a_legal_difference():
    """Nightly seed 1's witness: top_n_sigma(1) on 32,000 near-tied tokens (four values within
    3 ulps). llama.cpp's float std keeps every token, the float64 oracle masks about half; both
    are legal (the threshold sits within the float error), so the step counts as a legal
    difference and the chain is judged on, not failed for the mirostat_v2 pick that follows."""
    r = RECORDS_BY_NAME
    chain = GeneratedChain([(r["top_n_sigma"], {"n": 1.0}),
                            (r["mirostat_v2"], {"seed": 0, "tau": 5.0, "eta": 0.10000000149011612})])
    rep = generated_chain_stream(chain, "near_ties", 32000, 1, 12)
    assert rep.steps == 12 and not rep.stopped, rep.stopped
    assert rep.divergences == list(range(12)), "the masking difference is not reported as a legal difference"


def test_a_tie_made_by_float_temperature_is_a_legal_difference():
    """ci's witness: temp_ext(1.25) then greedy on three near-tied logits (-5.723492, -5.723492,
    -5.7234917). x / 1.25 rounds all three to one float32, so llama.cpp's greedy picks token 0
    where the float64 chain picks 2: a float32 boundary, counted, not a failure."""
    r = RECORDS_BY_NAME
    chain = GeneratedChain([(r["temp_ext"], {"t": 1.25, "delta": 0.0, "exponent": 1.0}), (r["greedy"], {})])
    rep = generated_chain_stream(chain, "near_ties", 3, 0, 16)
    assert rep.steps == 16 and rep.boundary_flips >= 1, rep


def test_a_typical_cut_within_its_score_tolerance_is_a_legal_difference():
    """ci's witness: temp_ext(0.109375), typical(p = 0) and dist on two near-tied tokens. Their
    typicality scores lie within typical's float error of each other, so either may be the kept
    one; at step 7 the float64 chain keeps the other and dist picks it: a legal difference."""
    r = RECORDS_BY_NAME
    chain = GeneratedChain([(r["temp_ext"], {"t": 0.109375, "delta": 0.0, "exponent": 1.0}),
                            (r["typical"], {"p": 0.0, "min_keep": 0}), (r["dist"], {"seed": 0})])
    rep = generated_chain_stream(chain, "near_ties", 2, 0, 8)
    assert rep.steps == 8 and rep.boundary_flips >= 1, rep


def test_an_end_to_end_composition_bug_is_caught():
    """The end-to-end check is not excused away: an oracle chain with a stray temperature before
    dist (every stage itself legal) must fail within 20 steps on peaked rows."""
    from oracle import samplers as s
    from oracle.chain import Chain

    r = RECORDS_BY_NAME
    chain = GeneratedChain([(r["top_k"], {"k": 40}), (r["dist"], {"seed": 3})])
    buggy = Chain([s.top_k(40), s.temp(0.6), s.dist(3)])
    with pytest.raises(PeerMismatch, match="none had a float32 boundary"):
        generated_chain_stream(chain, "zipf", 1000, 0, 20, e2e=buggy)


@pytest.mark.parametrize("u, reachable", [(0.25, [0]), (0.5, [0, 1]), (0.5 + 2.0**-20, [1]), (0.999, [2])])
def test_reachable_selections_straddle_only_cdf_boundaries(u, reachable):
    """The selector's legal alternatives: index 1's CDF interval is (0.5, 0.75]; a draw within the
    weights' tolerance of 0.5 may give 0 or 1 (a float32 path on the other side of the boundary),
    a draw 2^-20 past it (far beyond the 1e-9 tolerance) only 1."""
    from properties.numerics import discrete_reachable

    w = np.array([0.5, 0.25, 0.25])
    assert discrete_reachable(w, np.full(3, 1e-9), u).tolist() == reachable


def test_mirostat_k_underflowing_to_zero_is_clamped_to_one():
    """The nightly's crash, pinned (a typical stage had left three near-tied candidates): the
    estimated s is near 0, so k = (ε·2^μ / (1 - N^-ε))^(1/s) underflows to 0 in float64. The legal
    builder took log(0) for its slack (NaN) and crashed; llama.cpp keeps max(int(k), 1) tokens, so the
    legal answer is the single best candidate, and the oracle's own answer is legal."""
    from oracle.candidates import TokenDataArray
    from properties.peers.legality import PeerOutput, check
    from properties.peers.llama_cpp.legal import Drift, legal_for

    LOGITS = np.array([4.63174152, 4.63004732, 4.63343954], np.float32)  # noqa: N806

    def state() -> TokenDataArray:
        return TokenDataArray(np.array([17870, 30877, 12495]), LOGITS.astype(np.float64),
                              np.array([0.00019668, 0.00019634, 0.00019701]), n_vocab=32000)

    smp = RECORDS_BY_NAME["mirostat"].build({"seed": 3, "tau": 5.0, "eta": 0.1, "m": 100}, 32000)
    legal = legal_for(smp, state(), Drift(mu=1.86e-6))
    assert legal.oracle.ids.tolist() == [12495]
    best = PeerOutput(np.array([12495]), LOGITS[2:], np.array([1.0], np.float32), 0, True)
    verdict = check(legal, state(), best)
    assert verdict.ok, verdict.why
