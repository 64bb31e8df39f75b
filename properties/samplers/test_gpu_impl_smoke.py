"""Hand-worked examples for gpu_impl (NumPy backend): llama.cpp's test-sampling.cpp cases as
masked rows, tie rules, per-row parameters and the ValueError contract."""
import math

import ml_dtypes
import numpy as np
import pytest

import gpu_impl as g

P4 = [0.1, 0.2, 0.3, 0.4]
NINF = -np.inf


def logits(*rows):
    return np.log(np.asarray(rows, dtype=np.float32))


def kept(out):
    """Surviving ids of each row."""
    return [set(np.flatnonzero(np.isfinite(r)).tolist()) for r in out]


def test_softmax_masks_and_normalises():
    p = g.softmax(np.array([[0.0, NINF, 0.0], [NINF, NINF, NINF]], np.float32))
    assert p.dtype == np.float32
    np.testing.assert_allclose(p[0], [0.5, 0.0, 0.5])
    assert (p[1] == 0).all()


def test_greedy_first_max_and_no_candidate():
    assert g.greedy(np.array([[1.0, 3.0, 3.0, NINF]], np.float32)).tolist() == [1]
    with pytest.raises(ValueError, match=r"rows \[1\]"):
        g.greedy(np.array([[0.0, 1.0], [NINF, NINF]], np.float32))


@pytest.mark.parametrize("u, want", [(0.0, 0), (0.05, 0), (0.09, 0), (0.25, 1), (0.59, 2), (0.61, 3), (0.999, 3)])
def test_dist_inverse_cdf_in_vocab_order(u, want):
    assert g.dist(logits(P4), [u]).tolist() == [want]


def test_dist_never_picks_masked_token():
    x = np.array([[NINF, 0.0, NINF, NINF]], np.float32)
    assert g.dist(x, [0.0]).tolist() == [1] and g.dist(x, [0.999999]).tolist() == [1]
    assert g.dist(x, np.array([0.5])).dtype == np.int64


def test_temp_cases():
    x = logits(P4)
    assert g.temp(x, 1.0).tobytes() == x.tobytes()
    assert kept(g.temp(x, 0.0)) == [{3}]
    np.testing.assert_array_equal(g.temp(x, 0.5), x / np.float32(0.5))
    assert kept(g.temp(np.array([[2.0, 5.0, 5.0]], np.float32), -1.0)) == [{1}]


def test_temp_ext():
    x = logits(P4)
    assert g.temp_ext(x, 1.0, 0.0, 1.0).tobytes() == x.tobytes()
    assert kept(g.temp_ext(x, 0.0, 0.0, 1.0)) == [{3}]
    flat = np.ones((1, 4), np.float32)  # entropy = ln 4: normalised 1, so T = t + delta
    np.testing.assert_allclose(g.temp_ext(flat, 1.0, 0.5, 1.0), flat / 1.5, rtol=1e-6)
    one = np.array([[NINF, 2.0, NINF]], np.float32)
    assert g.temp_ext(one, 1.0, 0.5, 1.0).tobytes() == one.tobytes()


@pytest.mark.parametrize("k, want", [(1, {3}), (3, {1, 2, 3}), (4, {0, 1, 2, 3}), (9, {0, 1, 2, 3})])
def test_top_k(k, want):
    assert kept(g.top_k(logits(P4), k)) == [want]


def test_top_k_ties_noop_and_per_row():
    x = np.array([[1.0, 1.0, 1.0, 0.0]], np.float32)
    assert kept(g.top_k(x, 2)) == [{0, 1}]
    x = logits(P4, P4)
    out = g.top_k(x, np.array([1, 0]))
    assert kept(out)[0] == {3} and out[1].tobytes() == x[1].tobytes()
    assert g.top_k(x, -1).tobytes() == x.tobytes()


@pytest.mark.parametrize("p, min_keep, want", [
    (0.0, 0, {3}), (0.7, 0, {2, 3}), (0.8, 0, {1, 2, 3}), (0.0, 3, {1, 2, 3}), (0.95, 0, {0, 1, 2, 3})])
def test_top_p(p, min_keep, want):
    assert kept(g.top_p(logits(P4), p, min_keep)) == [want]


def test_top_p_noop_keeps_values():
    x = logits(P4)
    assert g.top_p(x, 1.0).tobytes() == x.tobytes()
    out = g.top_p(x, 0.7)
    assert out[0, 3] == x[0, 3] and out[0, 2] == x[0, 2]


@pytest.mark.parametrize("p, want", [
    (0.00, {0, 1, 2, 3}), (0.24, {0, 1, 2, 3}), (0.26, {1, 2, 3}), (0.49, {1, 2, 3}), (0.51, {2, 3}),
    (0.74, {2, 3}), (0.76, {3}), (1.00, {3}), (1.05, {3})])
def test_min_p(p, want):
    assert kept(g.min_p(logits(P4), p)) == [want]


def test_min_p_min_keep_fallback():
    assert kept(g.min_p(logits(P4), 0.76, 2)) == [{2, 3}]
    assert kept(g.min_p(np.zeros((1, 4), np.float32), 2.0, 2)) == [{0, 1}]  # ties: lowest ids


@pytest.mark.parametrize("probs, p, want", [
    ([0.97, 0.01, 0.01, 0.01], 0.5, {0}), ([0.4, 0.2, 0.2, 0.2], 0.5, {1, 2, 3}),
    ([0.2, 0.4, 0.2, 0.2], 0.3, {0, 2}), ([0.4, 0.2, 0.2, 0.2], 1.0, {0, 1, 2, 3})])
def test_typical(probs, p, want):
    assert kept(g.typical(logits(probs), p)) == [want]


@pytest.mark.parametrize("n, want", [(1.0, {2, 3}), (0.0, {0, 1, 2, 3}), (3.0, {0, 1, 2, 3})])
def test_top_n_sigma(n, want):
    assert kept(g.top_n_sigma(logits(P4), n)) == [want]


@pytest.mark.parametrize("threshold, want", [(0.09, {3}), (0.19, {2, 3}), (0.29, {1, 2, 3}), (0.39, {0, 1, 2, 3})])
def test_xtc(threshold, want):
    # test-sampling.cpp: seed 0's first float draw is 0.548813522 <= probability 0.99
    x = logits([0.4, 0.3, 0.2, 0.1])
    assert kept(g.xtc(x, [0.548813522], 0.99, threshold)) == [want]


def test_xtc_untouched_rows():
    x = logits([0.4, 0.3, 0.2, 0.1])
    assert g.xtc(x, [0.995], 0.99, 0.09).tobytes() == x.tobytes()  # chance > probability
    assert g.xtc(x, [0.0], 0.99, 0.09, 2).tobytes() == x.tobytes()  # 4 - 3 < min_keep
    assert g.xtc(x, [0.0], 0.99, 0.6).tobytes() == x.tobytes()  # threshold > 0.5
    ties = np.zeros((1, 3), np.float32)  # all p = 1/3: the highest id is the least probable
    assert kept(g.xtc(ties, [0.0], 1.0, 0.3)) == [{2}]


@pytest.mark.parametrize("hist, rep, fp, want", [
    ([0], 50.0, 0.0, [0, 0.25, 0.25, 0.25, 0.25]),
    ([0, 1, 2], 50.0, 0.0, [0, 0, 0, 0.5, 0.5]),
    ([0, 1, 2, 0, 0], 50.0, 0.0, [0, 0, 0, 0.5, 0.5]),
    ([0], 1.0, 5.0, [0.000011, 0.249997, 0.249997, 0.249997, 0.249997]),
    ([0, 1, 2], 1.0, 5.0, [0.000023, 0.000023, 0.000023, 0.499966, 0.499966]),
    ([0, 1, 2, 0, 0], 1.0, 5.0, [0.0, 0.000023, 0.000023, 0.499977, 0.499977])])
def test_penalties_llama_cases(hist, rep, fp, want):
    out = g.penalties(logits([0.2] * 5), np.array([hist]), len(hist), rep, fp, fp)
    np.testing.assert_allclose(g.softmax(out)[0], want, atol=1e-5)


def test_penalties_window_padding_and_noop():
    x = logits([0.2] * 5)
    out = g.penalties(x, np.array([[3, -1, 0, 1, -1]]), 2, 1.0, 1.0, 0.0)  # window = [0, 1]
    np.testing.assert_array_equal(out[0], x[0] - np.float32([1, 1, 0, 0, 0]))
    assert g.penalties(x, np.array([[0, 1]]), 0, 2.0, 1.0, 1.0).tobytes() == x.tobytes()
    assert g.penalties(x, np.zeros((1, 0), np.int64), 8, 2.0, 1.0, 1.0).tobytes() == x.tobytes()


def test_logit_bias():
    x = np.zeros((2, 3), np.float32)
    out = g.logit_bias(x, np.array([1.0, NINF, 0.0]))
    np.testing.assert_array_equal(out, [[1, NINF, 0], [1, NINF, 0]])
    with pytest.raises(ValueError):
        g.logit_bias(x, np.array([np.nan, 0, 0]))
    with pytest.raises(ValueError):
        g.logit_bias(x, np.zeros(4))


def test_mirostat_v2():
    x = logits(P4)
    ids, mu = g.mirostat_v2(x, 0.1, [0.99], 5.0, 0.1)  # nothing within mu: the top token only
    assert ids.tolist() == [3]
    np.testing.assert_allclose(mu, [0.1 - 0.1 * (0.0 - 5.0)], rtol=1e-6)
    ids, mu = g.mirostat_v2(x, 10.0, [0.5], 5.0, 0.1)  # sorted 0.4, 0.3: cum 0.7 >= 0.5
    assert ids.tolist() == [2]
    np.testing.assert_allclose(mu, [10.0 - 0.1 * (-math.log2(0.3) - 5.0)], rtol=1e-5)


def test_dtypes_accepted():
    x = logits(P4)
    for dt in (np.float16, ml_dtypes.bfloat16, np.float64):
        out = g.top_k(x.astype(dt), 2)
        assert out.dtype == np.float32 and kept(out) == [{2, 3}]


@pytest.mark.parametrize("bad", [
    np.zeros(4, np.float32), np.zeros((0, 4), np.float32), np.zeros((1, 0), np.float32),
    np.zeros((2, 2), np.int32), np.zeros((1, 2, 2), np.float32)])
def test_bad_logits(bad):
    with pytest.raises(ValueError):
        g.softmax(bad)


def test_nan_and_posinf_rows_named():
    x = np.zeros((4, 3), np.float32)
    x[1, 0], x[3, 2] = np.nan, np.inf
    with pytest.raises(ValueError, match=r"\[1, 3\]"):
        g.top_k(x, 1)


def test_bad_parameters():
    x = np.zeros((4, 3), np.float32)
    with pytest.raises(ValueError, match=r"parameter k has shape \(3,\) but batch is 4"):
        g.top_k(x, np.array([1, 2, 3]))
    for call in (lambda: g.top_p(x, np.nan), lambda: g.temp(x, np.inf), lambda: g.min_p(x, 0.1, -1),
                 lambda: g.penalties(x, np.zeros((4, 1), np.int64), 4, 0.0, 0.0, 0.0),
                 lambda: g.penalties(x, np.full((4, 1), 3), 4, 1.1, 0.0, 0.0),
                 lambda: g.dist(x, np.full(4, 1.5)), lambda: g.top_k(x, 1.5)):
        with pytest.raises(ValueError):
            call()
