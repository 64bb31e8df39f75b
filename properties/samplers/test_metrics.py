"""oracle.metrics: checked against SciPy and against an independent enumeration of every 16-bit
float; and the "cosine lies" property — hypothesis must find two logit vectors whose cosine
exceeds 0.99 while their top-5 token sets are disjoint (why the report never trusts cosine)."""
from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import find, given, settings, strategies as st
from scipy import special
from scipy.spatial import distance

from oracle import metrics
from properties import recording
from properties.profiles import WITNESS_SEARCH_PHASES
from properties.samplers.strategies import FAMILIES, make_logits


@st.composite
def vectors(draw, n_max: int = 4096):
    n = draw(st.sampled_from([1, 2, 5, 17, 100, n_max]), label="n")
    fam = draw(st.sampled_from([f for f in FAMILIES if f not in ("neg_inf", "one_finite")]), label="family")
    s1, s2 = draw(st.integers(0, 2**16), label="seed a"), draw(st.integers(0, 2**16), label="seed b")
    return make_logits(fam, n, s1).astype(np.float64), make_logits(fam, n, s2).astype(np.float64)


@given(vectors())
def test_cosine_matches_scipy_and_is_scale_invariant(ab):
    a, b = ab
    if not (np.abs(a).max() > 0 and np.abs(b).max() > 0):
        with pytest.raises(ValueError, match="zero vector"):
            metrics.cosine(a, b)
        return
    c = metrics.cosine(a, b)
    assert -1 <= c <= 1 and metrics.cosine(b, a) == c
    assert abs(c - (1 - distance.cosine(a / np.abs(a).max(), b / np.abs(b).max()))) <= 1e-12
    assert abs(metrics.cosine(3.5 * a, b) - c) <= 1e-12


@given(vectors())
def test_kl_matches_scipy(ab):
    a, b = ab
    want = float(special.rel_entr(special.softmax(a), special.softmax(b)).sum())
    got = metrics.kl_divergence(a, b)
    assert got >= 0 and abs(got - want) <= 1e-9 * max(1.0, want)
    assert metrics.kl_divergence(a, a) == 0.0
    assert abs(metrics.kl_divergence(a + 7.0, b) - got) <= 1e-9 * max(1.0, got)


@given(vectors(), st.integers(1, 8))
def test_top_k_overlap(ab, k):
    a, b = ab
    assert metrics.top_k_overlap(a, b, k) == metrics.top_k_overlap(b, a, k)
    assert metrics.top_k_overlap(a, a, k) == min(k, a.size)
    ids = metrics.top_k_ids(a, k)
    order = sorted(range(a.size), key=lambda i: (-a[i], i))  # llama.cpp's order, spelled out
    assert ids.tolist() == order[:k]


def test_metric_examples_and_refusals():
    assert metrics.max_abs_error([1.0, 2.0], [1.5, 2.0]) == 0.5
    assert metrics.max_rel_error([1.0, 0.0], [2.0, 0.0]) == 0.5
    assert metrics.kl_divergence([0.0, 0.0], [0.0, -np.inf]) == math.inf
    for bad in (lambda: metrics.cosine([1.0, np.nan], [1.0, 1.0]), lambda: metrics.top_k_ids([np.nan], 1),
                lambda: metrics.ulp_distance([np.nan], [1.0]), lambda: metrics.cosine([1.0], [1.0, 2.0])):
        with pytest.raises(ValueError):
            bad()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_ulp_distance_counts_representable_values(dtype):
    """Against an enumeration: sort every finite 16-bit value (±0 merged) and use the rank."""
    dt = np.dtype(ml_dtypes.bfloat16) if dtype == "bfloat16" else np.dtype(np.float16)
    with np.errstate(invalid="ignore"):  # the NaN bit patterns, dropped just below
        every = np.arange(2**16, dtype=np.uint32).astype(np.uint16).view(dt).astype(np.float64)
    values = np.unique(every[~np.isnan(every)])  # unique merges -0 and +0
    rng = np.random.default_rng(0)
    i, j = rng.integers(0, values.size, 5000), rng.integers(0, values.size, 5000)
    assert np.array_equal(metrics.ulp_distance(values[i], values[j], dtype).astype(np.int64), np.abs(i - j))


def test_ulp_distance_float32_and_float64_steps():
    x = np.float32(1e-38)
    steps = [x]
    for _ in range(5):
        steps.append(np.nextafter(steps[-1], np.float32(-1)))  # walks through zero into negatives
    assert metrics.ulp_distance(steps[0], steps[-1], "float32") == 5
    assert metrics.ulp_distance(-0.0, 0.0, "float64") == 0
    assert metrics.ulp_distance(1.0, np.nextafter(1.0, 2.0), "float64") == 1


@st.composite
def logit_pairs(draw):
    vocab = draw(st.sampled_from([5, 10, 100, 1000, 32000]), label="vocab")
    family = draw(st.sampled_from(["peaked", "flat", "zipf", "plateaus"]), label="family")
    offset = draw(st.sampled_from([0.0, 1.0, 10.0, 100.0]), label="common offset")
    relation = draw(st.sampled_from(["independent", "noisy copy", "same"]), label="relation")
    noise = draw(st.sampled_from([0.01, 0.1, 1.0]), label="noise")
    s1, s2 = draw(st.integers(0, 2**16), label="seed a"), draw(st.integers(0, 2**16), label="seed b")
    a = make_logits(family, vocab, s1).astype(np.float64) + offset
    if relation == "independent":
        b = make_logits(family, vocab, s2).astype(np.float64) + offset
    else:
        b = a + (noise * np.random.default_rng(s2).normal(size=vocab) if relation == "noisy copy" else 0.0)
    return {"vocab": vocab, "family": family, "offset": offset, "relation": relation, "noise": noise,
            "seeds": (s1, s2), "a": a, "b": b}


def test_cosine_lies_witness():
    """Find (and shrink) logits with cosine > 0.99 but no common top-5 token."""
    def lies(p) -> bool:
        return metrics.cosine(p["a"], p["b"]) > 0.99 and metrics.top_k_overlap(p["a"], p["b"], 5) == 0

    w = find(logit_pairs(), lies, settings=settings(max_examples=2000, database=None, derandomize=True,
                                                        phases=WITNESS_SEARCH_PHASES))
    a, b = w["a"], w["b"]
    cos, kl = metrics.cosine(a, b), metrics.kl_divergence(a, b)
    assert cos > 0.99 and metrics.top_k_overlap(a, b, 5) == 0
    recording.table("cosine_lies", {
        "recipe": {k: w[k] for k in ("vocab", "family", "offset", "relation", "noise", "seeds")},
        "cosine": cos, "top5_overlap": 0, "kl_nats": kl, "max_abs_logit_diff": metrics.max_abs_error(a, b),
        "top5_a": metrics.top_k_ids(a, 5).tolist(), "top5_b": metrics.top_k_ids(b, 5).tolist()})
