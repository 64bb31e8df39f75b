"""Property 9: llama.cpp's own tests/test-sampling.cpp cases, as explicit examples on the oracle.

The harness there builds ``{id=i, logit=logf(p_i), p=p_i}`` (float), applies the samplers, then
(for most helpers) ``dist(0)``, and checks size and every p within 1e-5 *in the current order*.
"""
from __future__ import annotations


import numpy as np
import pytest

from oracle import samplers as s
from oracle.candidates import TokenDataArray


def _accepting(smp: s.Sampler, tokens: list[int]) -> s.Sampler:
    for t in tokens:
        smp.accept(t)
    return smp


P4 = [0.1, 0.2, 0.3, 0.4]
P5 = [0.2] * 5
# (id, probs, samplers, expected p in array order, apply dist(0) afterwards)
CASES = [
    ("temp1", P4, lambda: [s.temp(1.0)], P4, True),
    ("temp0", P4, lambda: [s.temp(0.0)], [0, 0, 0, 1], True),
    ("temp_ext1", P4, lambda: [s.temp_ext(1.0, 0.0, 1.0)], P4, True),
    ("temp_ext0", P4, lambda: [s.temp_ext(0.0, 0.0, 1.0)], [0, 0, 0, 1], True),
    ("top_k1", P4, lambda: [s.top_k(1)], [1.0], True),
    ("top_k3", P4, lambda: [s.top_k(3)], [0.44444, 0.33333, 0.22222], True),
    ("top_k4", P4, lambda: [s.top_k(4)], [0.4, 0.3, 0.2, 0.1], True),
    ("top_k0", P4, lambda: [s.top_k(0)], P4, True),
    ("top_p0", P4, lambda: [s.top_p(0, 0)], [1.0], True),
    ("top_p0.7", P4, lambda: [s.top_p(0.7, 0)], [0.571429, 0.428571], True),
    ("top_p0.8", P4, lambda: [s.top_p(0.8, 0)], [0.44444, 0.33333, 0.22222], True),
    ("top_p1", P4, lambda: [s.top_p(1.0, 0)], P4, True),
    *[(f"min_p{p}", P4, (lambda p=p: [s.min_p(p, 0)]), exp, True) for p, exp in [
        (0.00, P4), (0.24, P4), (0.26, [0.2 / 0.9, 0.3 / 0.9, 0.4 / 0.9]), (0.49, [0.2 / 0.9, 0.3 / 0.9, 0.4 / 0.9]),
        (0.51, [0.3 / 0.7, 0.4 / 0.7]), (0.74, [0.3 / 0.7, 0.4 / 0.7]), (0.76, [1.0]), (1.00, [1.0]), (1.05, [1.0])]],
    *[(f"xtc{t}", [0.4, 0.3, 0.2, 0.1], (lambda t=t: [s.xtc(0.99, t, 0, 0)]), exp, False) for t, exp in [
        (0.09, [0.1]), (0.19, [0.2, 0.1]), (0.29, [0.3, 0.2, 0.1]), (0.39, [0.4, 0.3, 0.2, 0.1])]],
    ("typical_a", [0.97, 0.01, 0.01, 0.01], lambda: [s.typical(0.5, 0)], [0.97], False),
    ("typical_b", [0.4, 0.2, 0.2, 0.2], lambda: [s.typical(0.5, 0)], [0.2, 0.2, 0.2], False),
    *[(f"penalties{i}", P5, (lambda h=h, r=r, f=f, pr=pr: [_accepting(s.penalties(len(h), r, f, pr), h)]), exp, True)
      for i, (h, exp, r, f, pr) in enumerate([
          ([0], [0, 0.25, 0.25, 0.25, 0.25], 50.0, 0.0, 0.0),
          ([0, 1, 2], [0, 0, 0, 0.5, 0.5], 50.0, 0.0, 0.0),
          ([0, 1, 2, 0, 0], [0, 0, 0, 0.5, 0.5], 50.0, 0.0, 0.0),
          ([0], [0.000011, 0.249997, 0.249997, 0.249997, 0.249997], 1.0, 5.0, 5.0),
          ([0, 1, 2], [0.000023, 0.000023, 0.000023, 0.499966, 0.499966], 1.0, 5.0, 5.0),
          ([0, 1, 2, 0, 0], [0.000000, 0.000023, 0.000023, 0.499977, 0.499977], 1.0, 5.0, 5.0)])],
    *[(f"dry{i}", pr, (lambda h=h, m=m, al=al, n=n, br=br: [_accepting(s.dry(m, 1.1, al, n, br), h)]), exp, True)
      for i, (pr, h, exp, m, al, n, br) in enumerate([
          ([0.25] * 4, [0, 1], [0.25] * 4, 1.0, 2, 4, []),
          ([0.25] * 4, [0, 1, 2, 0, 1], [0.296923, 0.296923, 0.109232, 0.296923], 1.0, 2, 5, []),
          (P5, [0, 1, 3, 4, 0, 1], P5, 1.0, 2, 6, [[3]]),
          (P5, [0, 1, 2, 0, 1], [0.241818, 0.241818, 0.032727, 0.241818, 0.241818], 2.0, 2, 5, []),
          (P5, [0, 1, 2, 3, 4, 0, 1], P5, 1.0, 4, 7, [])])],
    ("top_n_sigma1", P4, lambda: [s.top_n_sigma(1.0)], [0, 0, 0.428571, 0.571429], True),
    ("top_n_sigma0", P4, lambda: [s.top_n_sigma(0.0)], P4, True),
    ("top_n_sigma3", P4, lambda: [s.top_n_sigma(3.0)], P4, True),
]


def _fresh(probs: list[float]) -> TokenDataArray:
    # llama.cpp's harness: logit = logf(p) in float, so the float32 rounding is part of the case
    cur = TokenDataArray.from_logits(np.log(np.asarray(probs, dtype=np.float32)).astype(np.float64))
    cur.p = np.asarray(probs, dtype=np.float64)
    return cur


@pytest.mark.parametrize("name, probs, build, expected, with_dist", CASES, ids=[c[0] for c in CASES])
def test_llama_cpp_case(name, probs, build, expected, with_dist):
    cur = _fresh(probs)
    for smp in build() + ([s.dist(0)] if with_dist else []):
        smp.apply(cur)
    assert cur.size == len(expected), f"{name}: size {cur.size}, llama.cpp expects {len(expected)}"
    np.testing.assert_allclose(cur.p, expected, rtol=0, atol=1e-5, err_msg=f"{name}: p in array order")


def test_dist_singleton_consumes_a_draw():
    """test_dist_singleton_rng: a one-candidate dist still draws, so two streams stay aligned."""
    one, two = s.dist(4242), s.dist(4242)
    one.apply(_fresh_logits([0.0]))
    two.apply(_fresh_logits([0.0, 0.0]))
    picks = []
    for _ in range(4):
        a, b = _fresh_logits([0.0] * 256), _fresh_logits([0.0] * 256)
        one.apply(a)
        two.apply(b)
        picks.append((a.selected_token, b.selected_token))
    assert all(x == y for x, y in picks), picks


def _fresh_logits(logits: list[float]) -> TokenDataArray:
    return TokenDataArray.from_logits(np.asarray(logits))


def _queue_case(n_vocab: int, seq: str, top_k: int, top_p: float, min_p: float) -> None:
    """test_sampler_queue: logit = logf(id), so p ∝ id (token 0 has p = 0). ``size`` is the size
    *after* each sampler; ``f32`` marks the float arithmetic of the C++ expectations."""
    f32 = np.float32
    with np.errstate(divide="ignore"):
        cur = TokenDataArray.from_logits(np.log(np.arange(n_vocab, dtype=f32)).astype(np.float64))
    min_id, max_id = 0, n_vocab - 1
    for c in seq:
        {"k": lambda: s.top_k(top_k), "p": lambda: s.top_p(float(f32(top_p)), 1),
         "m": lambda: s.min_p(float(f32(min_p)), 1)}[c]().apply(cur)
        s.dist(0).apply(cur)
        size = cur.size
        if c == "k":
            expected = min(size, top_k)
            min_id = max(min_id, n_vocab - top_k)
        elif c == "p":
            divisor = n_vocab * (n_vocab - 1) // 2 - min_id * (min_id - 1) // 2
            target = int(np.ceil(f32(top_p) * f32(divisor)))
            min_id, expected, cumsum = n_vocab, 0, 0
            while True:  # at least one token is always kept
                min_id, expected, cumsum = min_id - 1, expected + 1, cumsum + min_id - 1
                if cumsum >= target:
                    break
            if min_id == 1:  # token 0 has p == 0 and top_p stops before it otherwise
                min_id, expected = 0, expected + 1
        else:
            expected = min(max(int(np.ceil((f32(1) - f32(min_p)) * f32(n_vocab))), 1), size)
            min_id = min(max(int(np.floor(f32(min_p) * f32(n_vocab))), 1, n_vocab - size), n_vocab - 1)
        assert size == expected, f"{seq}[{c}]: size {size}, expected {expected}"
        if c == "k" or cur.sorted:
            assert cur.ids[0] == max_id and cur.ids[expected - 1] == min_id, (cur.ids[[0, expected - 1]], min_id)


QUEUE = [(10000, "k", 10000, 1.0, 1.0), (10000, "k", 1, 1.0, 1.0), (10000, "p", 10000, 1.0, 1.0),
         (10000, "p", 10000, 0.0, 1.0), (10000, "m", 10000, 1.0, 1.0), (10000, "m", 10000, 1.0, 1e-12),
         (10000, "k", 100, 1.0, 1.0), (10000, "p", 10000, 0.0003, 1.0), (10000, "p", 10000, 0.8, 1.0),
         (10000, "m", 10000, 1.0, 9997.9 / 9999.0), (10000, "m", 10000, 1.0, 0.1),
         *[(10000, q, 100, 0.8, 0.1) for q in ("kp", "km", "pk", "pm", "mk", "mp", "kpm", "kmp", "pkm", "pmk", "mkp", "mpk")],
         (10000, "mp", 100, 0.8, 9997.9 / 9999.0)]


@pytest.mark.parametrize("n_vocab, seq, top_k, top_p, min_p", QUEUE, ids=[f"{q[1]}-{q[2]}-{q[3]:g}-{q[4]:g}" for q in QUEUE])
def test_sampler_queue(n_vocab, seq, top_k, top_p, min_p):
    _queue_case(n_vocab, seq, top_k, top_p, min_p)
