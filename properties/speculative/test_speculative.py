"""rejection_sample judged: the first emitted token's law is p_0 exactly (stratified grid),
impl ≡ oracle up to float32 threshold reach, all-accepted, all-rejected, ties at the top-k and
top-p cuts, per-row top_k / top_p; and the oracle itself against a direct computation."""
from __future__ import annotations

import itertools
from typing import Callable

import numpy as np
import pytest
from hypothesis import example, given, settings, strategies as st

from oracle import speculative as spec
from properties import recording
from properties.failure import Failure
from properties.plugin import covered
from properties.speculative import PROPERTIES, checks
from properties.speculative.strategies import corners
from properties.stratified import grid

_STRATEGIES = {p.name: p.example() for p in PROPERTIES}


@pytest.mark.parametrize("prop", PROPERTIES, ids=str)
def test_rejection_sample(impl, prop):
    @settings(max_examples=min(settings().max_examples, prop.max_examples or 10**9), deadline=None)
    @given(case=_STRATEGIES[prop.name])
    def run(case):
        with covered():
            prop.judge(impl, case)

    for corner in prop.first_examples():
        run = example(case=corner)(run)

    run()
    if prop.name == "first_token_exact" and checks.FIGURES:
        recording.table("speculative_exactness", list(checks.FIGURES))


# --- the oracle judged ---------------------------------------------------------------------

def _law_rows(n_v: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    p, q = rng.random(n_v) * (rng.random(n_v) < 0.7), rng.random(n_v) * (rng.random(n_v) < 0.7)
    p[rng.integers(n_v)] += 0.5
    q[rng.integers(n_v)] += 0.5
    return p / p.sum(), q / q.sum()


@settings(deadline=None)
@given(st.integers(1, 300), st.integers(0, 2**32 - 1))
def test_oracle_first_token_law_is_p(n_v, seed):
    """min(p, q) + (1 - Σmin)·(p - q)⁺/Σ(p - q)⁺ = p: the law of the first token is the target's."""
    p, q = _law_rows(n_v, seed)
    np.testing.assert_allclose(spec.first_token_law(p, q), p, rtol=0, atol=1e-12)


@settings(deadline=None, max_examples=10)
@given(st.integers(2, 12), st.integers(0, 2**32 - 1))
def test_oracle_sampler_on_the_grid(n_v, seed):
    """The oracle's sampler itself, driven by the (a, r) product grid for each draft, reproduces
    first_token_law_given within the grid's discreteness (κ = 0: float64 only)."""
    p, q = _law_rows(n_v, seed)
    n_a, n_r = 16, 32
    pk = np.stack([p, p])
    for d in np.flatnonzero(q > 0):
        counts = np.zeros(n_v)
        for a in grid(n_a):
            for r in grid(n_r):
                counts[spec.rejection_sample(pk, q[None], [d], [a], [r, 0.5])[0]] += 1
        alpha = spec.accept_prob(p[d], q[d])
        res = spec.residual(p, q) / spec.residual(p, q).sum()
        onehot = np.eye(n_v)[d]
        allowed = n_r * 0.5 * (onehot + res) + min(n_a, n_a * (1 - alpha) + 0.5) + 1e-9
        want = n_a * n_r * spec.first_token_law_given(p, q, int(d))
        assert (np.abs(counts - want) <= allowed).all() and counts[p == 0].sum() == 0


def test_oracle_named_cases():
    # the boundary-tie shape: [0.4, 0.3, 0.3, 0] with k = 2 keeps exactly two tokens (lower id)
    np.testing.assert_allclose(spec.target_top_k(np.array([0.4, 0.3, 0.3, 0.0]), 2), [4 / 7, 3 / 7, 0, 0])
    p = np.array([[0.5, 0.5, 0.0], [0.0, 0.0, 1.0]])
    assert spec.rejection_sample(p, np.array([[0.0, 0.0, 1.0]]), [2], [0.0], [0.75, 0.3]) == [1]  # p(d) = 0
    assert spec.rejection_sample(p, np.array([[0.0, 0.0, 1.0]]), [0], [0.99], [0.1, 0.3]) == [0, 2]  # q(d) = 0 < p
    assert spec.llama_cpp_greedy_match([3, 4, 5], [3, 4]) == [3, 4, 5]
    assert spec.llama_cpp_greedy_match([3, 7, 5], [3, 4]) == [3, 7]
    assert spec.llama_cpp_greedy_match([9, 4, 5], [3, 4]) == [9]
    # top-p: through the first cumulative mass >= p, a tie past the crossing token dropped
    row = np.array([0.4, 0.3, 0.3, 0.0])
    np.testing.assert_allclose(spec.target_top_p(row, 0.55), [4 / 7, 3 / 7, 0, 0])
    np.testing.assert_allclose(spec.target_top_p(row, 0.4), [1, 0, 0, 0])  # cum 0.4 >= 0.4: the first token only
    np.testing.assert_allclose(spec.target_top_p(row, 0.0), [1, 0, 0, 0])
    np.testing.assert_allclose(spec.target_top_p(row, 1.0), row)
    np.testing.assert_allclose(spec.target_filter(np.array([0.1, 0.3, 0.3, 0.3]), 3, 0.6), [0, 0.5, 0.5, 0])


@pytest.mark.calls("rejection_sample")
def test_per_row_filters(impl):
    """Per-row top_k / top_p: each row of a batch with mixed settings (off, top-k, top-p, both) is
    what that row gives alone with the same uniforms, and never emits a token its filter drops."""
    rng = np.random.default_rng(5)
    B, K, V = 6, 2, 33
    p = rng.random((B, K + 1, V)).astype(np.float32) * (rng.random((B, K + 1, V)) < 0.6)
    p[:, :, 0] += np.float32(0.5)
    p /= p.sum(axis=2, keepdims=True)
    q = rng.random((B, K, V)).astype(np.float32)
    q /= q.sum(axis=2, keepdims=True)
    d = rng.integers(0, V, (B, K))
    a, r = rng.random((B, K)), rng.random((B, K + 1))
    k = np.array([0, 3, 0, 5, 40, 1])
    tp = np.array([1.0, 1.0, 0.5, 0.8, 0.3, 0.9], np.float32)
    with covered():
        tokens, n = impl("rejection_sample", p, q, d, a, r, k, tp)
        for b in range(B):
            one = impl("rejection_sample", p[b:b + 1], q[b:b + 1], d[b:b + 1], a[b:b + 1], r[b:b + 1], int(k[b]),
                       float(tp[b]))
            assert np.array_equal(one[0][0], tokens[b]) and one[1][0] == n[b], f"row {b} depends on its batch"
            pf = [spec.target_filter(row, int(k[b]), float(tp[b])) for row in p[b].astype(np.float64)]
            assert all(pf[i][t] > 0 for i, t in enumerate(tokens[b, :n[b]])), f"row {b} emitted a dropped token"


def test_legal_rows_come_nearest_the_oracle_first_and_lazily():
    """A dense row of 151,936 tokens at p = 0.5 has 1,044 legal kept counts: they are produced one
    at a time, the oracle's row first, then the counts nearest the oracle's (k, k - 1, k + 1, ...),
    so a judge reaches a correct fp32 engine's count without building the others (each is a row of
    V float64: building all 1,044 took 34.5 s and 1.25 GB for this one row, and a nightly run of
    the speculative room with the call log grew past 11 GB and its 30-minute limit)."""
    import inspect
    import itertools

    from properties.speculative.filters import kept_counts, legal_rows
    rng = np.random.default_rng(0)
    v = 151936
    row = rng.random(v) * (rng.random(v) < 0.9)
    row[rng.integers(v)] += 1.0
    row = (row / row.sum()).astype(np.float32).astype(np.float64)
    assert len(kept_counts(spec.target_top_k(row, 0), 0.5)) == 1044
    rows = legal_rows(row, 0, 0.5)
    assert inspect.isgenerator(rows)
    first = list(itertools.islice(rows, 5))
    k = spec.top_p_kept(row, 0.5)
    np.testing.assert_array_equal(first[0], spec.target_top_p(row, 0.5))
    assert [int(np.count_nonzero(r)) for r in first[1:]] == [k - 1, k + 1, k - 2, k + 2]


def _dense_case_and_engine(shift: int):
    """Three dense target rows (V = 20,000, top_p = 0.5: each position's fp32 window holds 19 kept
    counts), drafts q on the 8 tokens just past the oracle's cut plus ``shift`` - 8, and a rejection
    sampler whose top-p keeps ``shift`` tokens more than the oracle at every position (top-k off),
    exactly otherwise. Row 0's uniforms are a = 0, so it accepts every draft its rows keep."""
    from properties.speculative.strategies import SpecCase
    rng = np.random.default_rng(3)
    V, top_p = 20000, 0.5
    p = np.empty((3, V), np.float32)
    for i in range(3):
        row = rng.random(V) * (rng.random(V) < 0.9)
        row[rng.integers(V)] += 1.0
        p[i] = row / row.sum()
    rows64 = p.astype(np.float64)
    orders = [np.lexsort((np.arange(V), -row)) for row in rows64]
    kept = [spec.top_p_kept(row, top_p) + shift for row in rows64]
    q = np.zeros((2, V), np.float32)
    for i in range(2):
        q[i, orders[i][kept[i] - 8:kept[i]]] = 1 / 8
    engine_rows = []
    for row, order, m in zip(rows64, orders, kept):
        f = np.zeros(V)
        f[order[:m]] = row[order[:m]]
        engine_rows.append(f / f.sum())

    def impl(name, p_, q_, d, a, r, top_k, top_p_):
        B = d.shape[0]
        tokens, n = np.full((B, 3), -1, np.int64), np.zeros(B, np.int64)
        for b in range(B):
            out = spec.rejection_sample(np.stack(engine_rows), np.asarray(q_[b], np.float64), d[b], a[b], r[b])
            tokens[b, :len(out)], n[b] = out, len(out)
        return tokens, n
    return SpecCase("dense", p, q, 0, seed=11, top_p=top_p), impl


def test_every_position_may_take_its_own_legal_row():
    """An engine whose fp32 top-p keeps 8 tokens more than the oracle at every position (inside
    each position's fp32 window of 19 counts), drafting those tokens, is correct: the positions are
    judged one at a time, each against its legal rows (the 16 nearest combinations of rows called
    it wrong: the row it needs is the 17th of each position's). Keeping tokens past the window, it
    fails (it emits tokens no legal row keeps)."""
    from properties.speculative.filters import kept_counts
    case, inside = _dense_case_and_engine(8)
    windows = [kept_counts(row, case.top_p) for row in case.p.astype(np.float64)]
    assert all(spec.top_p_kept(row, case.top_p) + 8 in w for row, w in zip(case.p.astype(np.float64), windows))
    checks.check_matches_oracle(inside, case)
    past = max(w.stop - spec.top_p_kept(row, case.top_p) for row, w in zip(case.p.astype(np.float64), windows)) + 8
    case, outside = _dense_case_and_engine(past)
    with pytest.raises(Failure, match="never_excluded|where the target has p = 0"):
        checks.check_matches_oracle(outside, case)


def _engine(keep: Callable[[np.ndarray, int, float, int], np.ndarray]):
    """A float64 rejection sampler whose target filter is ``keep(row, top_k, top_p, batch_row)``:
    the filtered row of one position of one batch row (the oracle's sampler after it)."""
    def impl(name, p, q, d, a, r, top_k, top_p):
        B, K1 = d.shape[0], d.shape[1] + 1
        tokens, n = np.full((B, K1), -1, np.int64), np.zeros(B, np.int64)
        for b in range(B):
            rows = np.stack([keep(row, int(np.ravel(top_k)[0]), float(np.ravel(top_p)[0]), b)
                             for row in np.asarray(p[b], np.float64)])
            out = spec.rejection_sample(rows, np.asarray(q[b], np.float64), d[b], a[b], r[b])
            tokens[b, :len(out)], n[b] = out, len(out)
        return tokens, n
    return impl


def _keep_ties(pick: str):
    """A top-k / top-p keeping the right number of tokens, choosing among those tied at the cut by
    ``pick``: "highest" ids, "random" per batch row, or "all" of them (the bug)."""
    def keep(row, top_k, top_p, b):
        want = spec.target_filter(row, top_k, top_p)
        n = int(np.count_nonzero(want))
        order = np.lexsort((np.arange(row.size), -row))
        cut = row[order[n - 1]]
        above, tied = np.flatnonzero(row > cut), np.flatnonzero(row == cut)
        if pick == "highest":
            tied = tied[::-1][:n - above.size]
        elif pick == "random":
            tied = np.random.default_rng(b).permutation(tied)[:n - above.size]
        out = np.zeros_like(row)
        out[above], out[tied] = row[above], row[tied]
        return out / out.sum()
    return keep


_TIE_CASES = corners()[:2]
"""[0.4, 0.3, 0.3, 0] with top_k = 2, and with top_p = 0.55: two tokens kept, token 1 or 2 with 0."""


@pytest.mark.parametrize("case", _TIE_CASES, ids=lambda c: f"top_k={c.top_k},top_p={c.top_p:.2f}")
def test_any_tied_token_may_be_kept_but_only_as_many_as_the_cut_says(case):
    """Which tied token a cut keeps is the engine's (llama.cpp's partial sort fixes none): an engine
    keeping token 2 instead of 1, or either at random per batch row, passes every body (the judge
    once pinned the lowest id: keeping {0, 2} failed ``never_excluded`` and ``tie_at_cut``); one
    keeping both tied tokens (three kept, the normaliser 1 instead of 0.7) fails ``tie_at_cut``'s
    probe and the exactness grid."""
    from properties.speculative.filters import legal_rows
    assert len(list(legal_rows(case.p[0], case.top_k, case.top_p))) == 2
    for pick in ("highest", "random"):
        engine = _engine(_keep_ties(pick))
        checks.check_matches_oracle(engine, case)
        checks.check_tie_at_cut(engine, case)
        checks.check_all_rejected(engine, case)
        if pick == "highest":  # the grid measures one filtered row: identical rows filtered alike
            checks.check_first_token_exact(engine, case)
    every = _engine(_keep_ties("all"))
    with pytest.raises(Failure, match="must be accepted"):
        checks.check_tie_at_cut(every, case)
    with pytest.raises(Failure, match="grid draws|q-weighted count"):
        checks.check_first_token_exact(every, case)
