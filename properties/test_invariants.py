"""Property 3: invariants that hold for oracle and implementation alike.

softmax: sums to 1 within (2·ceil(log2 n) + 4)·u (one tree sum for S, one for the check, one
rounding per division), non-negative, exactly 0 at -inf, and bitwise shift invariant for shifts
that are exact in fp32 (x - max is then the same float). Filters: no-op parameters are exact
no-ops; survivor sets are nested as k / p / n grow (or shrink for min_p); min_keep is honoured;
at least one token survives whenever one was finite.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

from oracle.samplers.base import Empty
from properties import recording
from properties.catalogue import sampler_records
from properties.checks import Case, oracle_survivors, run_impl, survivors
from properties.errors import U32, log2n
from properties.helpers import covered, params_for, record_cases
from properties.strategies import cases

FILTERS = sampler_records("filter")
NOOP = [r for r in sampler_records("filter", "transform") if r.noop]


@given(case=cases(dtypes=("float32", "float16", "bfloat16")), shift=st.integers(-256, 256))
def test_softmax_invariants(impl, case, shift):
    # snap to a 2^-8 grid within ±512 so that l + shift is exact in fp32
    grid = np.where(np.isfinite(case.logits.astype(np.float64)),
                    np.clip(np.round(case.logits.astype(np.float64) * 256) / 256, -512, 512), -np.inf)
    x = grid.astype(np.float32)
    with covered():
        p = impl("softmax", x)
        p_shift = impl("softmax", (grid + shift).astype(np.float32))
    n = np.isfinite(x).sum(axis=1)
    assert (p >= 0).all(), "negative probability"
    assert (p[~np.isfinite(x)] == 0).all(), "a -inf logit got non-zero probability"
    sums = p.astype(np.float64).sum(axis=1)
    bound = np.array([(2 * log2n(int(k)) + 4) * U32 for k in n])
    assert (np.abs(sums - 1) <= bound).all(), f"row sums {sums} differ from 1 by more than {bound}"
    assert np.array_equal(p, p_shift), "softmax is not invariant under an exact shift of the logits"
    recording.note("softmax", "invariants", case.dtype)


@pytest.mark.parametrize("record", NOOP, ids=str)
@given(data=st.data())
def test_noop_parameters_are_exact_noops(impl, record, data):
    case = data.draw(cases(dtypes=("float32",)), label="case")
    noop = data.draw(st.sampled_from(record.noop), label="noop")
    params = {k: (np.stack([v] * case.batch) if isinstance(v, np.ndarray) else np.full(case.batch, v))
              for k, v in noop.items()}
    c = Case(case.family, case.vocab, case.dtype, case.seeds, params, case.logits)
    with covered():
        out = run_impl(impl, record, c)
    assert np.array_equal(out, case.logits.astype(np.float32)), f"{record.name}{noop} changed the logits"
    assert isinstance(record.oracle({**noop, "n_vocab": case.vocab}), Empty), f"oracle {record.name}{noop} is not empty"
    recording.note(record.name, "noop", case.dtype)


@pytest.mark.parametrize("record", [r for r in FILTERS if r.monotone], ids=str)
@given(data=st.data())
def test_survivors_monotone_in_parameter(impl, record, data):
    case = data.draw(record_cases(record, "float32"), label="case")
    param, direction, active_from = record.monotone[0]
    other = data.draw(record.params(case.batch, case.vocab), label="other")[param]
    mine = np.maximum(case.params[param], active_from)
    other = np.maximum(other, active_from)
    lo, hi = np.minimum(mine, other), np.maximum(mine, other)
    small, large = (lo, hi) if direction > 0 else (hi, lo)
    for name, kept in (("oracle", lambda p: oracle_survivors(record, case, {**case.params, param: p})),
                       ("impl", lambda p: survivors(impl, record, case, {**case.params, param: p}))):
        with covered():
            a, b = kept(small), kept(large)
        bad = np.flatnonzero((a & ~b).any(axis=1))
        assert bad.size == 0, f"{name}: survivors at {param}={small[bad]} not within those at {large[bad]}"
    recording.note(record.name, "monotone", case.dtype)


@pytest.mark.parametrize("record", FILTERS, ids=str)
@given(data=st.data())
def test_min_keep_and_nonempty(impl, record, data):
    case = data.draw(record_cases(record, "float32"), label="case")
    n_finite = np.isfinite(case.logits).sum(axis=1)
    want = np.minimum(case.params["min_keep"], n_finite) if record.min_keep else np.zeros(case.batch, int)
    want = np.maximum(want, 1)
    with covered():
        for name, kept in (("oracle", oracle_survivors(record, case)), ("impl", survivors(impl, record, case))):
            got = kept.sum(axis=1)
            assert (got >= want).all(), f"{name}: {got} survivors, at least {want} required ({case!r})"
    recording.note(record.name, "min_keep", case.dtype)
