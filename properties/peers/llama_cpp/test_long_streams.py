"""Long seeded streams of every stateful llama.cpp sampler, in lockstep on one zipf row sequence
(``chains_differential.long_streams``); docs/findings.md's stream statements come from these.

ci: 150 steps at 1,000 tokens. nightly: 1,000 steps at each of 32,000, 151,936 and 262,144 tokens
(the floor asked of them): 51, 199 and 324 s on one worker in the seed-1 nightly of 2026-11-23 (whole
files are queued first, so the other worker runs the rest of the suite meanwhile).
A file of its own, so ``-n`` runs it beside the generated chains.
"""
from __future__ import annotations

import pytest

from properties import recording
from properties.peers.llama_cpp import adapter as peer
from properties.profiles import current_profile

_REASON = peer.available()
if _REASON is not None and _REASON.startswith("llama_cpp is not importable"):
    pytest.skip(_REASON, allow_module_level=True)

from properties.peers.llama_cpp.chains_differential import STATEFUL, long_streams  # noqa: E402
from properties.samplers.records import RECORDS_BY_NAME  # noqa: E402

pytestmark = pytest.mark.peer
NIGHTLY = current_profile() == "nightly"
STREAM_STEPS = {32000: 1000, 151936: 1000, 262144: 1000} if NIGHTLY else {1000: 150}
STREAMS: dict = {}
recording.table("llama_cpp_long_streams", STREAMS)


def _samplers() -> dict:
    """Every stateful sampler with its record's one representative parameter set (its stream feeds
    or selects its state)."""
    return {name: (RECORDS_BY_NAME[name], RECORDS_BY_NAME[name].llama.stream_params) for name in STATEFUL}


@pytest.mark.parametrize("vocab", list(STREAM_STEPS))
def test_long_seeded_streams(vocab):
    """>= STREAM_STEPS[vocab] judged apply/accept rounds of every stateful sampler on the same seeded zipf
    rows; every round legal. A self-state sampler restarts (fresh state, next seed) after a legal
    divergence, which is recorded."""
    samplers = _samplers()
    assert all("zipf" in rec.llama.families for rec, _ in samplers.values())  # one row sequence for all of them
    steps = STREAM_STEPS[vocab]
    outs = long_streams(samplers, "zipf", vocab, 11, steps)
    for name, out in outs.items():
        STREAMS[f"{name} @ {vocab}"] = {"steps": out.steps, "identical": out.identical, "streams": out.streams,
                                        "first_divergence": out.first_divergence[:10], "stops": out.stops[:3]}
    short = {name: (out.steps, out.stops[:3]) for name, out in outs.items() if out.steps < steps}
    assert not short, f"fewer than {steps} judged steps: {short}"


def test_long_streams_do_not_depend_on_scheduling():
    """The lockstep streams on one thread and on a pool of three (more threads than the CI
    machine's two cores, so streams of one row interleave and finish out of order) give the same
    report, field by field: each stream owns its samplers and state, and rows are read-only.
    Two runs with the same seed are also the same report (determinism)."""
    samplers = _samplers()
    # 32,000 tokens: adaptive_p diverges and restarts within a few dozen rows there, so restarts
    # (the order-sensitive part: new seeds, fresh state) are exercised too
    serial = long_streams(samplers, "zipf", 32000, 11, 40, workers=1)
    pooled = long_streams(samplers, "zipf", 32000, 11, 40, workers=3)
    assert serial == pooled
    assert any(out.streams > 1 for out in serial.values()), "no restart happened: pick another seed"
