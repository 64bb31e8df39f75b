"""The batch-invariance property bites: an rms_norm whose reduction blocks depend on the number of
rows (a kernel tuned by the token count: sum of squares by 256 threads for up to 4 rows, by 1,024
threads otherwise; each a strided in-order run per thread, then a tree). Every row is as accurate
as gpu_impl's (a blocked order the default contract accepts), so the default contract passes it
and records that it varies; ``--contract batch_invariant`` kills it naming the row and the two
batch sizes; and a mutant that keeps gpu_impl's "batch_invariant:rms_norm" claim is held to it
under the default contract too."""
from __future__ import annotations

import re
import types

import gpu_impl.ops
import numpy as np
import pytest

from properties import numerics as nm
from properties.backends import Impl
from properties.ops.batch_invariance import BATCH_OPS_BY_NAME, batch_examples, check_batch_invariance
from properties.ops.suite import PROPERTIES_BY_NAME
from properties.zoo.ops import _f32, _xp, mutate
from properties.property import Property
from properties.zoo.runner import default_budget, run_property

BOP = BATCH_OPS_BY_NAME["rms_norm"]
SMALL_BATCH, SMALL_THREADS, THREADS = 4, 256, 1024


def _block_sum(sq, threads: int):
    """Σ over the last axis as a block of ``threads`` threads sums it: thread t adds elements
    t, t + threads, … in order (float32), then the threads' partials meet in a tree."""
    xp = _xp(sq)
    rows, n = sq.shape
    per = -(-n // threads)
    lanes = xp.zeros((rows, per * threads), xp.float32)
    lanes[:, :n] = sq
    lanes = lanes.reshape(rows, per, threads)
    acc = lanes[:, 0, :].copy()
    for i in range(1, per):
        acc = acc + lanes[:, i, :]
    while acc.shape[1] > 1:
        half = acc.shape[1] // 2
        acc = acc[:, :half] + acc[:, half:]
    return acc[:, 0]


def _token_count_tuned(o: types.ModuleType):
    def rms_norm(x, weight=None, eps=1e-6, unit_offset=False):
        o.rms_norm(x, weight, eps, unit_offset)  # the same refusals as gpu_impl
        xp = _xp(x)
        a = _f32(x)
        shape, n = a.shape, a.shape[-1]
        flat = a.reshape(-1, n)
        threads = SMALL_THREADS if flat.shape[0] <= SMALL_BATCH else THREADS  # the bug: tuned by the batch
        with np.errstate(all="ignore"):
            big = xp.abs(flat).max(axis=-1, keepdims=True)
            broken = ~xp.isfinite(big)
            s = xp.where(broken | (big == 0), xp.float32(1), big)
            unit = flat / s
            ms = _block_sum(unit * unit, threads)[:, None] / xp.float32(n)
            denom = xp.hypot(xp.sqrt(ms) * s, xp.float32(eps) ** xp.float32(0.5))
            y = flat / denom
            if weight is not None:
                w = _f32(xp.asarray(weight))
                y = y * (w + xp.float32(1) if unit_offset else w)
            elif unit_offset:
                y = y * xp.float32(2)
        return xp.where(broken, xp.float32(xp.nan), y).reshape(shape)
    return rms_norm


def _mutant(backend: str, keep_claim: bool) -> Impl:
    base = gpu_impl.ops
    claims = tuple(c for c in base.LOGITCHECK_CLAIMS if keep_claim or c != f"{nm.BATCH_CLAIM}:rms_norm")
    name = "token_count_tuned_rms_norm" + ("+claim" if keep_claim else "")
    return Impl(mutate(base, name, lambda o: {"rms_norm": _token_count_tuned(o), "LOGITCHECK_CLAIMS": claims}),
                backend)


@pytest.fixture
def contract_named():
    """Switch the active contract for one test, and back."""
    before = nm.active_contract().name

    def use(name: str) -> nm.Contract:
        return nm.use_contract(name)
    yield use
    nm.use_contract(before)


def _batch_property(seen: list) -> Property:
    return Property("batch_invariance[rms_norm]", lambda point, **scope: batch_examples(BOP),
                    lambda impl, point, ex: seen.append(check_batch_invariance(impl, BOP, ex)), frozenset({"rms_norm"}))


def test_batch_invariant_contract_kills_the_mutant(backend, contract_named):
    contract_named("batch_invariant")
    found = run_property(_batch_property([]), _mutant(backend, keep_claim=False), default_budget())
    print(found.why)
    assert found.killed, "the batch_invariant contract let a batch-tuned rms_norm through"
    named = re.search(r"batch invariance\[rms_norm\]: rms_norm: row \d+ differs between a batch of \d+ \(the whole "
                      r"batch\) and a batch of \d+ .*element \(\d+,\): .* u apart; the batch_invariant contract "
                      r"demands it\nCASE BatchExample\(", found.why)
    assert named, found.why


def test_default_contract_passes_the_mutant_and_sees_it_vary(backend, contract_named):
    contract_named("default")
    mutant, seen = _mutant(backend, keep_claim=False), []
    found = run_property(_batch_property(seen), mutant, default_budget())
    assert not found.killed, found.why
    assert found.ran == len(seen) > 0 and any(not s.invariant for s in seen), \
        f"no example of {found.ran} showed the mutant's rows varying with the batch"
    for dtype in ("float32", "float16", "bfloat16"):  # numerically correct: it passes impl≡oracle
        p = PROPERTIES_BY_NAME["impl_vs_oracle[rms_norm]"]
        ok = run_property(p.at(dtype, f"{p.name}/{dtype}"), mutant, default_budget())
        assert ok.ran > 0 and not ok.killed, ok.why


def test_a_claim_is_held_under_the_default_contract(backend, contract_named):
    contract_named("default")
    found = run_property(_batch_property([]), _mutant(backend, keep_claim=True), default_budget())
    assert found.killed and "the implementation claims batch_invariant:rms_norm" in found.why, found.why


def test_gpu_impl_survives(backend, contract_named):
    contract_named("batch_invariant")
    found = run_property(_batch_property([]), Impl(gpu_impl.ops, backend), default_budget())
    assert not found.killed, found.why
