"""Cases of the device path's host-side branches and shared state (run as kernel_agreement.py's
are): min_p's fallback taken or skipped eagerly and always launched under graph capture (both
equal to the NumPy path), the row max kernel that the validation reads (NaN, +inf, signed zeros),
and a select workspace left zeroed for the next select that shares it."""
from __future__ import annotations

import numpy as np
import pytest

import gpu_impl as g
from properties.gpu.device_cases import case, FAMILIES, per_row, rows

SHAPES = ((1, 7), (3, 1000), (2, 4099), (2, 262144), (64, 8192))


def _captured(cp, fn):
    """fn() captured into a CUDA graph on a fresh stream, replayed once; returns its result."""
    stream = cp.cuda.Stream(non_blocking=True)
    with stream:
        fn()  # compiles and warms the pool outside the capture
        stream.begin_capture()
        out = fn()
        graph = stream.end_capture()
        graph.launch(stream)
    stream.synchronize()
    return out


@case(shape=SHAPES)
@case(short=[False, True])
@case(family=["peaked", "flat", "plateaus", "neg_inf", "near_ties"])
def min_p_fallback_eager_and_captured(cp, family, short, shape, monkeypatch):
    from gpu_impl.kernels import filters
    B, V = shape
    x = rows(family, shape)
    # row 0 is short when asked: p = 30 puts the threshold above the max, so nothing survives
    # and min_keep's fallback decides; without it p <= 1 and min_keep <= 1 (the max survives)
    p = per_row([30.0, 0.05, 0.5, 0.0] if short else [0.05, 0.5, 1.0, 0.0], B, np.float32)
    mk = per_row([1, 3, 1100, 0] if short else [0, 1, 0, 1], B, np.int64)
    assert np.isfinite(x[0]).any()
    want = g.min_p(x, p, mk)
    args = (cp.asarray(x), cp.asarray(x.max(axis=1)), cp.asarray(p), cp.asarray(mk))
    calls = []
    real = filters.nth_element
    monkeypatch.setattr(filters, "nth_element", lambda *a, **k: (calls.append(1), real(*a, **k))[1])
    eager = filters.min_p_rows(*args)
    assert len(calls) == (1 if short else 0), "the eager host check took the wrong branch"
    np.testing.assert_array_equal(eager.get(), want)
    calls.clear()
    graph = _captured(cp, lambda: filters.min_p_rows(*args))
    # the warm-up call before the capture is eager (takes the fallback only with short rows); the
    # captured call must launch it whatever the rows
    assert len(calls) == (2 if short else 1), "under capture the fallback must always be launched"
    np.testing.assert_array_equal(graph.get(), want)


@case(shape=SHAPES)
@case(family=FAMILIES)
def row_max_is_the_max_and_counts_refused_rows(cp, family, shape):
    from gpu_impl.kernels import row_max
    x = rows(family, shape)
    got, n_bad = row_max(cp.asarray(x))
    np.testing.assert_array_equal(got.get(), x.max(axis=1))
    assert int(n_bad) == 0
    B, V = shape
    y = x.copy()
    y[0, V // 2] = np.nan
    y[-1, V - 1] = np.inf  # the same row when B == 1: NaN wins, one refused row
    got, n_bad = row_max(cp.asarray(y))
    assert np.isnan(got.get()[0]) and int(n_bad) == min(B, 2)
    if B > 1:
        assert got.get()[-1] == np.inf


@case()
def row_max_orders_signed_zeros(cp):
    from gpu_impl.kernels import row_max
    x = np.full((3, 8200), -np.inf, np.float32)
    x[0, :] = -0.0
    x[1, 100], x[1, 8100] = -0.0, 0.0
    x[2, 5] = -0.0
    got = row_max(cp.asarray(x))[0].get()
    assert [np.signbit(v) for v in got] == [True, False, True] and (got == 0).all()


@case()
def validation_on_device_names_the_refused_rows(cp):
    x = np.zeros((4, 5000), np.float32)
    x[1, 7], x[3, 4999] = np.nan, np.inf
    with pytest.raises(ValueError) as on_gpu:
        g.softmax(cp.asarray(x))
    with pytest.raises(ValueError) as on_cpu:
        g.softmax(x)
    assert str(on_gpu.value) == str(on_cpu.value) and "rows [1, 3]" in str(on_gpu.value)


@case(shape=[(3, 1000), (2, 262144)])
def select_leaves_its_workspace_zeroed(cp, shape):
    """A chain runs up to three selects in one workspace: each must leave histograms and pass
    counters zero, and a second select in the same workspace must be exact."""
    from gpu_impl.kernels._build import BINS, STATE_BYTES
    from gpu_impl.kernels.select import empty_prefix, nth_element, select_workspace
    B, V = shape
    x = rows("plateaus", shape)
    ws = select_workspace(B, V)
    for n in (per_row([1, 40], B, np.int64), per_row([V, V // 3 + 1], B, np.int64)):
        out = empty_prefix(cp, B)
        nth_element(cp.asarray(x), cp.asarray(n), None, out, ws=ws)
        np.testing.assert_array_equal(out.c.get(), np.sort(x, axis=1)[:, ::-1][np.arange(B), n - 1])
        counters = ws[B * STATE_BYTES:B * (STATE_BYTES + 12 * BINS + 16)]
        assert int(cp.count_nonzero(counters)) == 0
