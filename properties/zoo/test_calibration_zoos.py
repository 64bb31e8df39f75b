"""The calibration zoos are what they claim to be (a false-alarm table means nothing if a
"sequential" engine secretly sums pairwise, a kill table nothing if a mutant equals gpu_impl):

- every conforming member exposes gpu_impl's and gpu_impl.ops' whole API;
- each emulated summation order is bit-identical to an explicit scalar loop of that order;
- every near-threshold mutant differs from gpu_impl on an input built for its bug.
Seconds, not minutes: fixed small inputs, no hypothesis.

Then the judge itself: every conforming member passes every property it touches
(``test_conforming_member_has_no_false_alarm``, the false-alarm table per record in the report),
every near-threshold mutant is killed by a property gpu_impl passes
(``test_near_threshold_mutant_is_killed``, the kill table with examples-to-kill), and the matmul
gate separates TF32/bf16 operands from correct GEMMs at long K.
"""
from __future__ import annotations

import importlib

import ml_dtypes
import numpy as np
import pytest

import gpu_impl
import gpu_impl.ops as gops
from properties.zoo.conforming import MEMBERS
from properties.zoo.conforming import _arith as A
from properties.zoo.near_threshold import NEAR_MUTANTS, mutant_modules

F32 = np.float32


@pytest.mark.parametrize("name", MEMBERS)
def test_member_has_the_whole_api(name):
    s = importlib.import_module(f"properties.zoo.conforming.{name}")
    o = importlib.import_module(f"properties.zoo.conforming.{name}.ops")
    assert set(s.__all__) == set(gpu_impl.__all__) and set(o.__all__) == set(gops.__all__)
    assert s.REPLACED and all(getattr(s, f) is not getattr(gpu_impl, f) for f in s.REPLACED)
    assert all(getattr(o, f) is not getattr(gops, f) for f in o.REPLACED)


def _loop_sum(x):
    s = F32(0)
    for v in x:
        s = F32(s + v)
    return s


def _loop_block_sum(x, t):
    """The CUDA block written out: strided per-thread loops, then halving trees."""
    part = [_loop_sum(x[i::t]) for i in range(t)]
    warps = []
    for w in range(0, t, 32):
        lanes = part[w:w + 32]
        while len(lanes) > 1:
            h = len(lanes) // 2
            lanes = [F32(lanes[i] + lanes[i + h]) for i in range(h)]
        warps.append(lanes[0])
    warps += [F32(0)] * (32 - len(warps))
    while len(warps) > 1:
        h = len(warps) // 2
        warps = [F32(warps[i] + warps[i + h]) for i in range(h)]
    return warps[0]


def test_sum_orders_match_their_scalar_loops():
    x = (np.random.default_rng(0).random(2500) * 2.0 ** np.random.default_rng(1).integers(-8, 8, 2500)).astype(F32)
    assert A.sequential_sum(x[None])[0] == _loop_sum(x)
    assert A.sequential_scan(x)[-1] == _loop_sum(x)
    assert A.block_sum(x[None], 1024)[0] == _loop_block_sum(x, 1024)
    assert A.block_sum(x[None, :100])[0] == _loop_block_sum(x[:100], 128)
    exact = x.astype(np.float64).sum()
    assert abs(A.kahan_sum(x[None])[0] - exact) <= 2 * A.F32(2.0**-24) * np.abs(x).sum()
    scan = A.kahan_scan(x[None])[0].astype(np.float64)
    assert np.all(np.abs(scan - np.cumsum(x.astype(np.float64))) <= 2 * 2.0**-24 * np.cumsum(np.abs(x)))
    assert np.array_equal(A.block_scan(x[None])[0][[0, 1]], np.cumsum(x[:2], dtype=F32))


def test_online_normaliser_rescales():
    z = np.concatenate([np.zeros(300), np.full(300, 40.0)]).astype(F32)[None]
    m, s = A.online_sum_exp(z)
    assert m[0] == 40 and abs(float(s[0]) - (300 + 300 * np.exp(-40.0))) <= 1e-4


def _row(values, v=64):
    row = np.full((1, v), -3.0, F32)
    row[0, :len(values)] = values
    return row


def _differs(mutant) -> bool:
    s, o = mutant_modules(mutant.name)
    x = np.random.default_rng(5).normal(0, 3, (2, 4096)).astype(F32)
    flat = np.random.default_rng(9).uniform(-0.5, 0.5, (1, 4096)).astype(F32)
    cum = np.cumsum(gpu_impl.softmax(flat)[0][np.argsort(-flat[0], kind="stable")], dtype=F32)
    below = np.nextafter(F32(2), F32(0))
    ties = _row([2.0, below, below, 1.0])
    spike = np.random.default_rng(11).normal(0, 1, (1, 40000)).astype(F32)
    spike[0, 0] = 22.0  # the rest weigh ~e^-22 each, below half an ulp of a running sum of 1
    call = {
        "softmax": lambda m: m.softmax(x * F32(40) if "no_max" in mutant.name else x),
        "top_p": lambda m: m.top_p(_row([1.0] * 4, 4) if "ulp" in mutant.name else flat,
                                   0.5 if "ulp" in mutant.name else cum[2000]),
        "min_p": lambda m: m.min_p(ties, 1.0) if "ulp" in mutant.name else m.min_p(_row([0.0, -2.9959]), 0.05),
        "top_k": lambda m: m.top_k(ties, 1),
        "dist": lambda m: (m.dist(np.repeat(spike, 4, axis=0), 1 - np.array([1e-6, 1e-5, 3e-5, 1e-4]))
                           if "running_sum" in mutant.name else
                           np.stack([m.dist(x[:1], np.array([u])) for u in np.linspace(0.01, 0.99, 99)])),
        "mirostat_v2": lambda m: m.mirostat_v2(x, 8.0, 0.5, 3.0, 1.0)[1],
    }
    a = np.random.default_rng(6).normal(size=(4, 4096)).astype(F32)
    b = np.random.default_rng(7).normal(size=(4096, 3)).astype(F32)
    q = np.random.default_rng(8).normal(size=(3, 2, 128)).astype(F32)
    keys = np.random.default_rng(10).normal(size=(200, 2, 128)).astype(F32) * F32(4)  # > one 64-key tile
    ocall = {
        "matmul": lambda m: m.matmul(a, b),
        "rms_norm": lambda m: m.rms_norm(a * F32(1e-4)),
        "softmax": lambda m: m.softmax(a * F32(30)),
        "attention": lambda m: m.attention(q, keys, keys, np.arange(197, 200), np.arange(200)),
    }
    if mutant.domain == "ops":
        return not np.array_equal(ocall[mutant.replaces](o), ocall[mutant.replaces](gops), equal_nan=True)
    return not np.array_equal(call[mutant.replaces](s), call[mutant.replaces](gpu_impl), equal_nan=True)


@pytest.mark.parametrize("mutant", NEAR_MUTANTS, ids=str)
def test_near_mutant_is_a_mutant(mutant):
    assert _differs(mutant), f"{mutant.name} computes exactly what gpu_impl computes on its witness input"


def test_tf32_rounding_keeps_ten_bits():
    from properties.zoo.near_threshold.op_bugs import to_tf32

    x = np.array([1 + 2.0**-10, 1 + 2.0**-11, 1 + 3 * 2.0**-11, 1 + 2.0**-12], F32)
    assert to_tf32(x).tolist() == [1 + 2.0**-10, 1.0, 1 + 2 * 2.0**-10, 1.0]  # ties to even
    assert to_tf32(np.array([3.0], F32).astype(ml_dtypes.bfloat16).astype(F32))[0] == 3.0


# --- the judge judged: conforming engines pass, near-threshold bugs are killed ------------------

CONFORMING_PER_40 = 40
"""Drawn examples per property in the conforming hunt: one per 40 of the profile's (ci: 1, nightly:
10), after every property's pinned corners; ``python -m properties.zoo.calibration`` runs 40."""
_CONFORMING: dict[str, list[dict]] = {}
_NEAR: dict[str, dict] = {}


def _budget(per: int = 1) -> int:
    from hypothesis import settings

    return max(1, settings().max_examples // per)


@pytest.mark.parametrize("member", MEMBERS)
def test_conforming_member_has_no_false_alarm(backend, member):
    """Every property of every domain the member touches (those calling a function it replaces),
    under the active contract, on its corners and drawn examples: a failure is the judge's."""
    from properties import recording
    from properties.zoo.calibration import conforming_hunts, false_alarm_rows

    # the members are CPU engines written in NumPy (llama.cpp loops, torch, Kahan, ...): they judge
    # the judge, whichever backend the run's implementation uses
    hunts = conforming_hunts(member, _budget(CONFORMING_PER_40), "numpy")
    _CONFORMING[member] = false_alarm_rows(member, hunts)
    recording.table("calibration_conforming", [r for m in MEMBERS for r in _CONFORMING.get(m, [])])
    alarms = [f"{r.property}: {r.why.splitlines()[0][:300]}" for h in hunts for r in h.results if r.killed]
    assert not alarms, f"{member} (a correct engine) fails {len(alarms)} propert(ies): {alarms[:3]}"


@pytest.mark.parametrize("dom, name", [pytest.param(m.domain, m.name, id=m.name) for m in NEAR_MUTANTS])
def test_near_threshold_mutant_is_killed(backend, dom, name):
    """Hunted to its first kill with the profile's budget per property; the kill is replayed on
    gpu_impl, which must pass it (else it is a false alarm, not a catch)."""
    from properties import recording
    from properties.zoo.calibration import kill_row, near_hunt

    found, replays = near_hunt(dom, name, _budget(), backend)
    _NEAR[name] = kill_row(dom, found, replays)
    recording.table("calibration_near", [_NEAR[m.name] for m in NEAR_MUTANTS if m.name in _NEAR])
    assert found.killed, f"{name} survived every property that calls {', '.join(sorted(found.results[0].prop.functions()))}"
    assert not any(r.killed for r in replays), f"the kill of {name} also fails gpu_impl: {replays[0].why[:300]}"


@pytest.mark.parametrize("k", [1024, 4096])
def test_matmul_gate_separates_reduced_operands(k):
    """At K where the worst case γ_K passes TF32 operands (K >= 1,024) the Higham-Mary gate fails
    TF32 and bf16 operands on every family and passes every conforming GEMM."""
    from properties.failure import Failure
    from properties.backends import Impl
    from properties.ops.checks import check_matches_oracle
    from properties.ops.records import MATMUL_FAMS, OP_RECORDS_BY_NAME
    from properties.ops.strategies import OpCase

    rec = OP_RECORDS_BY_NAME["matmul"]
    correct = [gops] + [importlib.import_module(f"properties.zoo.conforming.{m}.ops") for m in MEMBERS]
    bugs = [mutant_modules(n)[1] for n in ("matmul_tf32_inputs", "matmul_bf16_inputs")]
    for fam in MATMUL_FAMS:
        case = OpCase("matmul", "float32", fam, 0, {"m": 4, "k": k, "n": 8})
        for mod in correct:
            check_matches_oracle(Impl(mod, "numpy"), rec, case)
        for mod in bugs:
            with pytest.raises(Failure, match="Higham-Mary gate|exceeds the model"):
                check_matches_oracle(Impl(mod, "numpy"), rec, case)
