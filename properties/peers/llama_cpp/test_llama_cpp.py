"""The real peer: llama.cpp's own samplers (llama-cpp-python 0.3.36) against the oracle.

One apply per drawn case for every sampler; >= 100-step seeded streams for the stateful ones
(the oracle's Mt19937 must reproduce llama.cpp's token stream); the default chain (and three
other presets) end to end; and every recorded finding replayed against the real llama.cpp.
What counts as a legal llama.cpp answer is stated in ``properties/peers/llama_cpp/legal.py``.
"""
from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import assume, given, settings, strategies as st

from properties import recording
from properties.profiles import current_profile
from properties.peers.llama_cpp import adapter as peer

_REASON = peer.available()
if _REASON is not None and _REASON.startswith("llama_cpp is not importable"):
    print(f"SKIP llama.cpp peer: {_REASON}")
    pytest.skip(_REASON, allow_module_level=True)

from oracle.chain import SamplingParams  # noqa: E402
from properties.peers.llama_cpp import findings  # noqa: E402
from properties.peers.legality import FindingDomain, Unsupported  # noqa: E402
from properties.samplers.records import RECORDS as ALL_RECORDS  # noqa: E402
from properties.peers.llama_cpp.chains_differential import chain_stream  # noqa: E402
from properties.peers.llama_cpp.streams import Stream, raw_state, single_apply, stream  # noqa: E402
from properties.samplers.strategies import cases, f32, vocab_sizes  # noqa: E402

RECORDS = [r for r in ALL_RECORDS if r.llama is not None]

pytestmark = pytest.mark.peer
STEPS = 100
# per record: examples, steps, steps identical up to ties, steps where llama.cpp differed legally,
# why streams stopped early, and the largest fraction of the p / logit allowance llama.cpp used
SUMMARY: dict[str, dict] = {}
recording.table("llama_cpp_peer", SUMMARY)
recording.table("llama_cpp_findings", findings.table())


def _stream_examples() -> int:
    # a stream example is 100 applies: a quarter of the profile's examples (10 under ci, 100 nightly)
    return max(3, settings.default.max_examples // 4)


def _stream_vocab() -> int:
    return 32000 if current_profile() == "nightly" else 4096


def _tally(name: str, **counts) -> None:
    row = SUMMARY.setdefault(name, {"examples": 0, "steps": 0, "identical": 0, "legal_differences": 0,
                                    "token_differences": 0, "stopped": [], "worst_p_ratio": 0.0,
                                    "worst_logit_ratio": 0.0})
    for key, value in counts.items():
        if key == "stopped":
            if value and len(row["stopped"]) < 5:
                row["stopped"].append(value)
        elif key.startswith("worst"):
            row[key] = max(row[key], value)
        else:
            row[key] += value


def _exact_rows(record) -> st.SearchStrategy:
    """m equal maxima (p = 1/m, cumulative masses k/m: exact in float) plus -inf tokens: the
    boundary cases (cum == p, p == threshold) where llama.cpp's >= / > rules are decided exactly."""
    def row(m: int, n_masked: int, level: float) -> np.ndarray:
        return np.array([level] * m + [-np.inf] * n_masked, dtype=np.float32)

    def aligned(params: dict, m: int, k: int) -> dict:
        # put the rule's threshold exactly on a cumulative mass / probability of the row
        return {**params, **{key: k / m for key in ("p", "threshold") if key in params}}
    return st.tuples(st.sampled_from([1, 2, 4, 8]), st.integers(0, 3), f32(-5.0, 5.0)).flatmap(
        lambda t: st.tuples(st.just(row(*t)), st.tuples(record.llama.params(t[0] + t[1]), st.integers(1, t[0]),
                                                         st.booleans()).map(
            lambda pk: aligned(pk[0], t[0], pk[1]) if pk[2] else pk[0])))


@pytest.mark.parametrize("record", RECORDS, ids=repr)
@given(data=st.data())
def test_one_apply_matches_llama_cpp(record, data):
    """Same survivors in the same order (ties and float32 boundaries aside), same logits and p
    within the float32 model, same ``sorted`` flag, same ``selected``."""
    if data.draw(st.integers(0, 4), label="exact row?") == 0:
        x, params = data.draw(_exact_rows(record), label="exact row, params")
    else:
        case = data.draw(cases(lambda b, v: record.llama.params(v), families=record.llama.families, max_batch=1), label="case")
        x, params = case.logits[0], case.params
    try:
        verdict = single_apply(record, params, x.astype(np.float32))
    except (FindingDomain, Unsupported):
        assume(False)  # outside what this record claims; findings and strategies cover it
    _tally(record.name, examples=1, steps=1, identical=int(verdict.identical),
           worst_p_ratio=verdict.p_ratio, worst_logit_ratio=verdict.logit_ratio)
    recording.note(record.name, "llama_cpp_apply", "float32")


STATEFUL = [r for r in RECORDS if r.llama.stream]


@pytest.mark.parametrize("record", STATEFUL, ids=repr)
@settings(max_examples=_stream_examples())
@given(data=st.data())
def test_stream_matches_llama_cpp(record, data):
    """>= 100 apply/accept steps with the same seeds: identical tokens and state, step by step."""
    family = data.draw(st.sampled_from(record.llama.families), label="family")
    vocab = data.draw(vocab_sizes(_stream_vocab(), 2), label="vocab")
    params = data.draw(record.llama.params(vocab), label="params")
    seed = data.draw(st.integers(0, 2**16), label="seed")
    rep = stream(record, params, family, vocab, seed, STEPS)  # the stream feeds its own history
    _tally(f"{record.name} stream", examples=1, steps=rep.steps, identical=rep.identical,
           legal_differences=len(rep.divergences), stopped=rep.stopped,
           worst_p_ratio=rep.worst_p_ratio, worst_logit_ratio=rep.worst_logit_ratio)
    assert rep.steps == STEPS or rep.stopped, f"stream ended after {rep.steps} steps without a reason"


CHAIN_PRESETS = {
    "default": (SamplingParams(), ("peaked", "zipf", "flat", "plateaus")),
    "everything": (SamplingParams(penalty_repeat=1.1, penalty_freq=0.125, penalty_present=0.25,
                                  dry_multiplier=0.75, dry_breakers=((1,), (2, 3)), typ_p=0.875, top_p=0.875,
                                  xtc_probability=0.5, xtc_threshold=0.125, dynatemp_range=0.25),
                   ("peaked", "zipf", "flat")),
    "mirostat_v2": (SamplingParams(mirostat=2), ("peaked", "zipf", "flat")),
    "mirostat": (SamplingParams(mirostat=1), ("zipf",)),
}


def _float32(params: SamplingParams) -> SamplingParams:
    """The parameters as llama.cpp receives them: every float field rounded to float32."""
    floats = {f.name: float(np.float32(getattr(params, f.name))) for f in dataclasses.fields(params)
              if isinstance(getattr(params, f.name), float)}
    return dataclasses.replace(params, **floats)


@pytest.mark.parametrize("preset", list(CHAIN_PRESETS))
@settings(max_examples=_stream_examples())
@given(data=st.data())
def test_chain_matches_llama_cpp(preset, data):
    """``oracle.chain.default_chain`` vs the same llama.cpp chain over >= 100 seeded steps."""
    base, families = CHAIN_PRESETS[preset]
    family = data.draw(st.sampled_from(families), label="family")
    # a chain step judges every stage: ~0.1 s at 32,000 tokens, so chains stay at <= 4,096
    vocab = data.draw(vocab_sizes(4096, 2), label="vocab")
    seed = data.draw(st.integers(0, 2**32 - 2), label="seed")
    params = _float32(dataclasses.replace(base, seed=seed))
    rep = chain_stream(params, family, vocab, seed % 2**16, STEPS)
    _tally(f"chain {preset}", examples=1, steps=rep.steps, identical=rep.identical,
           legal_differences=len(rep.divergences), token_differences=rep.token_differences, stopped=rep.stopped,
           worst_p_ratio=rep.worst_p_ratio)
    assert rep.steps == STEPS or rep.stopped, f"chain ended after {rep.steps} steps without a reason"


@pytest.mark.parametrize("finding", [f for f in findings.FINDINGS if f.replayable and f.engine == "llama.cpp"],
                         ids=lambda f: f.id)
def test_finding_still_reproduces(finding):
    """Each recorded llama.cpp behaviour still occurs (a fixed upstream bug fails here, loudly),
    and the oracle still answers as recorded."""
    llama, oracle = finding.replay()
    assert llama == finding.llama_output, f"llama.cpp now gives {llama}, recorded {finding.llama_output}"
    assert oracle == finding.oracle_output, f"the oracle now gives {oracle}, recorded {finding.oracle_output}"


def test_mirostat_v2_cut_where_float32_p_underflows():
    """Witness (nightly seed 0, past_fp16 rows): on peaked rows mirostat v2's mu grows by ~eta·tau a
    step, past 149 bits, where float32's p of a token e^-105 below the top is 0 (surprise inf, cut)
    while float64's is 2.5e-46 (surprise 151, kept). Both cuts are legal; the bracket once took
    dp/(p ln 2) as the surprise's error, which is finite where p^ may underflow, and failed llama.cpp."""
    record = next(r for r in RECORDS if r.name == "mirostat_v2")
    s = Stream(record, {"seed": 3, "tau": 10.0, "eta": 1.0}, 2, 0, 20)
    try:
        for t in range(16):  # mu = 20 + ~10 a step: 170 bits after 15 peaked rows
            assert s.step(t, raw_state(np.array([0.0, -60.0], dtype=np.float32))), s.report.stopped
        assert s.oracle.mu > 160
        row = np.array([0.0, -105.0], dtype=np.float32)  # e^-105 = 2.5e-46 < 2^-150: expf gives 0
        s.step(16, raw_state(row))
        assert s.report.steps == 17
        assert s.report.stopped == "legal divergence at step 16 (state follows the selection)"
    finally:
        s.free()
