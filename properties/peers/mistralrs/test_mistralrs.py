"""The real peer: mistral.rs 0.9.5 (the ``mistralrs`` CPU wheel) against its named variant
``oracle.engines.mistralrs`` and the llama.cpp oracle, through logit-injection models.

- logprobs / top_logprobs: every step reports ln softmax(penalised / T) of the whole row (before
  top_k / top_p / min_p), judged per token within the float32 softmax model
  (``numerics.softmax_model``) plus the penalties' roundings; across steps of one sequence, the
  penalties see the generated tokens (presence and frequency count only those);
- survivors: which tokens the real sampler can emit, read from draws (no API returns the weights):
  a drawn token must lie in the variant's bracket (thresholds moved by the float32 mass window;
  per class of tied probabilities, counts), and each class the variant must keep, holding a
  token of probability >= 2e-3, must be drawn (N = 12,000: a kept token is missed with
  probability <= e^-24 = 3.8e-11);
- the law of the draw: the χ² gate on N = 12,000 draws at α = 1e-10 (a correct engine fails
  with probability <= 1e-10 over streams). The stream cannot be chosen: ``seed=`` is ignored and
  every Runner starts the same stream (``test_rng_stream_is_fixed_and_the_seed_ignored``), so a
  run repeats exactly, and the stream is one fixed draw of that 1e-10 chance;
  N = 12,000 detects a total-variation bias of 0.05 with power 0.99 on these 15-token rows;
- each difference from llama.cpp has a witness replayed here (``WITNESSES``, ``test_penalty_*``).
"""
from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from oracle.engines import Settings
from oracle.engines import llama_cpp as o_llama
from oracle.engines import mistralrs as o_mrs
from properties import recording
from properties.peers.llama_cpp.findings import FINDINGS
from properties.numerics import U32, mass_allowance, softmax_model
from properties.peers.mistralrs import adapter

_WHY = adapter.available()
if _WHY is not None:
    pytest.skip(_WHY, allow_module_level=True)

from properties.stats import gof_counts  # noqa: E402

pytestmark = pytest.mark.peer
ENGINE = f"mistral.rs {adapter.PINNED} (mistralrs wheel, CPU)"
N_DRAWS = 12_000  # sample_size(15 tokens, TVD 0.05) = 11,300: power 0.99 at α = 1e-10
P_SEEN = 2e-3  # a kept token this likely is missed in N_DRAWS with probability <= e^-24 = 3.8e-11
FIRST = 3  # ids 0-2 are the special tokens


def _lp_allowance(y: np.ndarray, err: float) -> np.ndarray:
    """|reported - exact| allowed per token, in nats: the float32 softmax's relative error (the
    model's per-token part and its normaliser), the logit error ``err`` of the penalised, tempered
    row twice (the token's own and the normaliser's), and ln's rounding."""
    m = softmax_model(y)
    lp = np.log(np.where(m.p > 0, m.p, 1.0))
    return m.rel() + 2 * err + U32 * (1 + np.abs(lp))


def _penalty_err(x: np.ndarray, s: Settings) -> float:
    """The float32 error of the penalised row divided by T: 4 u of the largest term (|l|·max(r, 1/r)
    + c·|f| + |pr|), as the engine records' mistral.rs model, and one rounding of the division."""
    r = float(s.repetition_penalty)
    c = np.bincount(np.asarray(s.history, dtype=np.int64), minlength=x.size)[:x.size] if s.history else 0 * x
    terms = np.abs(x) * max(r, 1 / r) + c * abs(s.frequency_penalty) + (c > 0) * abs(s.presence_penalty)
    y = o_mrs.penalised(x, s)
    return (4 * U32 * float(terms.max()) + 2 * U32 * float(np.abs(y).max())) / float(s.temperature)


@st.composite
def rows(draw) -> np.ndarray:
    n = draw(st.integers(2, 24), label="vocab")
    rng = np.random.default_rng(draw(st.integers(0, 2**16), label="seed"))
    if draw(st.booleans(), label="grid"):
        levels = rng.choice(np.arange(-24, 25), size=draw(st.integers(1, 12), label="levels"), replace=False) / 8
        return adapter.with_specials(rng.choice(levels, size=n))
    return adapter.with_specials(rng.standard_normal(n) * draw(st.sampled_from([0.5, 2.0]), label="scale"))


@settings(max_examples=max(8, settings.default.max_examples // 3), deadline=None)
@given(row=rows(), data=st.data())
def test_logprobs_are_the_variant(row, data):
    """Three steps of one sequence: each step's top_logprobs (every token) is ln softmax(penalised / T)
    with the history = prompt + the tokens generated so far."""
    n = row.size
    s = Settings(temperature=data.draw(st.sampled_from([1.0, 0.7, 1.5]), label="t"),
                 repetition_penalty=data.draw(st.sampled_from([1.0, 1.3, 0.8]), label="rep"),
                 presence_penalty=data.draw(st.sampled_from([0.0, 0.5]), label="presence"),
                 frequency_penalty=data.draw(st.sampled_from([0.0, 0.25]), label="frequency"),
                 prompt=tuple(data.draw(st.lists(st.integers(FIRST, n - 1), min_size=1, max_size=6), label="prompt")))
    x = row.astype(np.float32).astype(np.float64)
    with adapter.engine(row) as e:
        steps = e.steps(s, 3)
    out: tuple[int, ...] = ()
    for i, step in enumerate(steps):
        ss = s.with_(output=out)
        y = o_mrs.penalised(x, ss) / float(s.temperature)
        want = y - y.max() - math.log(np.exp(y - y.max()).sum())
        got = np.array([step.top.get(t, -np.inf) for t in range(n)])
        tol = _lp_allowance(y, _penalty_err(x, ss))
        live = want > -80  # below, float32's softmax underflows: any value <= -80 (or -inf) is legal
        bad = np.flatnonzero(live & ~(np.abs(got - want) <= tol))
        assert not bad.size, (f"step {i}: token {bad[0]} logprob {got[bad[0]]!r}, variant {want[bad[0]]!r} "
                              f"± {tol[bad[0]]:.3g}\nrow {row.tolist()}\n{ss}")
        assert (got[~live] <= -80).all(), f"step {i}: an underflowing token reported {got[~live].max()}"
        assert step.logprob == step.top[step.token], f"step {i}: the token's logprob is not its top_logprobs entry"
        out += (step.token,)
    recording.note("peer:mistral.rs", "logprobs≡variant", "float32")


def _bracket(x: np.ndarray, s: Settings) -> tuple[np.ndarray, np.ndarray]:
    """(must, may): the variant's kept sets at top_p / min_p moved by the float32 windows towards
    keeping fewer and more (top_p: the mass allowance of the row; min_p: the ratio's 8 u · ln)."""
    n = x.size
    dp = mass_allowance(n, n) + 4 * U32 * float(np.abs(x[np.isfinite(x)]).max()) / float(s.temperature)
    em = math.exp(U32 * (abs(math.log(s.min_p)) + 8)) if s.min_p > 0 else 1.0

    def kept(p, m):
        return o_mrs.distribution(x, s.with_(top_p=min(max(p, 1e-12), 1.0), min_p=m)) > 0
    fewer = kept(s.top_p - dp if s.top_p < 1 else 1.0, min(s.min_p * em, 0.999999) if s.min_p > 0 else 0.0)
    more = kept(s.top_p + dp if s.top_p < 1 else 1.0, s.min_p / em)
    return fewer, more


SURVIVOR_SETTINGS = [
    Settings(temperature=0.7, top_k=4, prompt=(FIRST,)),  # the cut falls inside the tie at 0.5
    Settings(temperature=1.0, top_p=0.6, prompt=(FIRST,)),
    Settings(temperature=1.5, top_k=5, top_p=0.8, min_p=0.05, prompt=(FIRST,)),
    Settings(temperature=0.5, min_p=0.2, repetition_penalty=1.3, prompt=(FIRST, FIRST + 1)),
]


@pytest.mark.parametrize("s", SURVIVOR_SETTINGS, ids=lambda s: " ".join(
    f"{k}{v}" for k, v in (("T", s.temperature), ("k", s.top_k), ("p", s.top_p), ("min_p", s.min_p),
                           ("rep", s.repetition_penalty)) if v not in (0, 1.0, 0.0)))
def test_survivors_and_law_of_the_draw(s):
    """Draws of the real sampler on a row with ties at the cuts: survivors inside the variant's
    bracket (up to tie classes: an unstable partial sort picks which tied tokens top_k keeps), and
    the χ² gate against the variant's law."""
    body = [1.0, 1.0, 0.75, 0.5, 0.5, 0.25, 0.0, -0.5, -1.0, -1.0, -2.0, -4.0]
    row = adapter.with_specials(body)
    x = row.astype(np.float32).astype(np.float64)
    with adapter.engine(row) as e:
        got = e.draws(s, N_DRAWS, per_request=500)
    law = o_mrs.distribution(x, s)
    must, may = _bracket(x, s)
    drawn = np.bincount(got, minlength=x.size) > 0
    y = o_mrs.penalised(x, s)
    for value in np.unique(y):  # per tie class of the penalised logits
        cls = y == value
        likely = cls & must & (o_mrs.distribution(x, s.with_(top_k=0, top_p=1.0, min_p=0.0)) >= P_SEEN)
        assert drawn[cls].sum() <= may[cls].sum(), (f"drew {np.flatnonzero(drawn & cls).tolist()} of a class "
                                                     f"the variant keeps {np.flatnonzero(may & cls).tolist()} of")
        assert drawn[cls].sum() >= likely.sum(), (f"class {np.flatnonzero(cls).tolist()}: the variant keeps "
                                                   f"{np.flatnonzero(likely).tolist()}, drawn only "
                                                   f"{np.flatnonzero(drawn & cls).tolist()}")
    if np.array_equal(must, may):  # no knife edge: the law is the variant's, per tie class (which
        _, cls = np.unique(-y, return_inverse=True)  # tied tokens top_k keeps is unspecified)
        cls = cls.ravel()
        res = gof_counts(np.bincount(cls[got], minlength=cls.max() + 1), np.bincount(cls, weights=law))
        assert res.passed, res.describe()
    recording.note("peer:mistral.rs", "survivors and law", "float32")


@settings(max_examples=max(6, settings.default.max_examples // 4), deadline=None)
@given(row=rows(), data=st.data())
def test_truncation_equals_masking(row, data):
    """Tokens masked with a logit bias of -inf are no candidates: their logprob is -inf, the
    others' is the variant's on the row with those entries -inf (the row without them), and no
    draw (1,000) is a masked token or beyond the variant's bracket on that row (per tie class)."""
    n = row.size
    masked = data.draw(st.sets(st.integers(FIRST, n - 1), max_size=max(0, n - FIRST - 1)), label="masked")
    s = Settings(temperature=data.draw(st.sampled_from([1.0, 0.7]), label="t"),
                 top_k=data.draw(st.sampled_from([0, 1, 3]), label="top_k"),
                 top_p=data.draw(st.sampled_from([1.0, 0.8]), label="top_p"),
                 min_p=data.draw(st.sampled_from([0.0, 0.1]), label="min_p"), prompt=(n - 1,))
    x = row.astype(np.float32).astype(np.float64)
    xm = x.copy()
    xm[list(masked)] = -np.inf
    bias = {int(i): float("-inf") for i in masked}
    with adapter.engine(row) as e:
        step = e.steps(s, 1, bias=bias)[0]
        got = e.draws(s, 1000, bias=bias)
    y = o_mrs.penalised(xm, s) / float(s.temperature)
    fin = np.isfinite(y)
    want = np.where(fin, y - y[fin].max() - math.log(np.exp(y[fin] - y[fin].max()).sum()), -np.inf)
    lp = np.array([step.top.get(t, -np.inf) for t in range(n)])
    assert np.isneginf(lp[list(masked)]).all(), f"a masked token has a finite logprob: {lp[list(masked)]}"
    live = want > -80
    tol = _lp_allowance(np.where(fin, y, -np.inf), _penalty_err(np.where(fin, x, 0.0), s))
    assert (np.abs(lp[live] - want[live]) <= tol[live]).all(), f"logprobs {lp[live]} vs {want[live]}"
    _, may = _bracket(xm, s)
    drawn = np.bincount(got, minlength=n) > 0
    assert not drawn[list(masked)].any(), f"drew a masked token: {np.flatnonzero(drawn)}"
    for value in np.unique(y[fin]):  # per tie class: which tied tokens top_k keeps is unspecified
        cls = y == value
        assert drawn[cls].sum() <= may[cls].sum(), (f"drew {np.flatnonzero(drawn & cls).tolist()}, the variant keeps "
                                                     f"{np.flatnonzero(may & cls).tolist()} of that tie class")
    recording.note("peer:mistral.rs", "truncation≡masking", "float32")


def test_penalties_count_generated_tokens_in_their_own_order():
    """Witness (llama.cpp counts presence/frequency over the prompt too, and applies repetition
    first): prompt [4], greedy, repetition 2, presence 0.5. Step 1: token 4 (a prompt token) gets
    only the repetition penalty (1.0 -> 0.25 for a logit 0.5); step 2: the generated token 3
    (logit 1.0) is (1.0 - 0.5) / 2 = 0.25 - llama.cpp's order gives 1.0 / 2 - 0.5 = 0.0."""
    row = adapter.with_specials([1.0, 0.5, 0.0, -0.5])
    s = Settings(temperature=1e-9, repetition_penalty=2.0, presence_penalty=0.5, prompt=(4,))
    with adapter.engine(row) as e:
        steps = e.steps(s, 2)
    rel = lambda st_: {t: round(st_.top[t] - st_.top[6] - 0.5, 4) for t in (3, 4, 5)}  # noqa: E731
    assert [st_.token for st_ in steps] == [3, 3]
    assert rel(steps[0]) == {3: 1.0, 4: 0.25, 5: 0.0}, rel(steps[0])
    assert rel(steps[1]) == {3: 0.25, 4: 0.25, 5: 0.0}, rel(steps[1])
    x = np.asarray(row)
    for st_, out in zip(steps, ((), (3,))):
        y = o_mrs.penalised(x, s.with_(output=out))
        assert round(y[3], 4) == rel(st_)[3]  # the variant agrees
    y = o_llama.penalised(x, s.with_(prompt=(4, 3)))
    assert round(y[3], 4) == 0.0  # llama.cpp (prompt + output, repetition first)


WITNESSES = [
    # (difference, body, settings, mistral.rs keeps (row ids), llama.cpp keeps)
    ("temperature first: top_p measures the tempered mass (llama.cpp: temperature last)",
     [1.0, 0.0, -1.0], Settings(temperature=0.5, top_p=0.8, prompt=(FIRST,)), [3], [3, 4]),
    ("min_p in tempered space (llama.cpp: untempered)",
     [1.0, 0.0, -1.0], Settings(temperature=0.5, min_p=0.2, prompt=(FIRST,)), [3], [3, 4]),
    ("no difference: top_p on the renormalised top-k mass, as llama.cpp (un-renormalised would keep [3, 4])",
     list(np.log([0.5, 0.2, 0.2, 0.1])), Settings(top_k=2, top_p=0.6, prompt=(FIRST,)), [3], [3]),
]


@pytest.mark.parametrize("w", WITNESSES, ids=[w[0][:40] for w in WITNESSES])
def test_difference_from_llama_cpp_has_a_witness(w):
    """The survivors mistral.rs draws (N = 2,000: each kept token here has p >= 0.1, missed with
    probability <= 0.9^2000) are the variant's, and llama.cpp's are as recorded."""
    name, body, s, mrs_keeps, llama_keeps = w
    row = adapter.with_specials(body)
    with adapter.engine(row) as e:
        got = sorted(set(e.draws(s, 2000, per_request=500).tolist()))
    x = np.asarray(row, dtype=np.float64)
    assert got == mrs_keeps, f"{name}: mistral.rs drew {got}, recorded {mrs_keeps}"
    assert np.flatnonzero(o_mrs.distribution(x, s) > 0).tolist() == mrs_keeps, f"{name}: the variant disagrees"
    assert np.flatnonzero(o_llama.distribution(x, s) > 0).tolist() == llama_keeps, f"{name}: llama.cpp moved"


def test_rng_stream_is_fixed_and_the_seed_ignored():
    """Why draws are judged statistically and still repeat: every Runner starts the same stream
    (two Runners of one model draw the same tokens), ``seed=`` changes nothing once a Runner exists,
    and a seeded Runner as the process's first raises "cannot seed the CPU rng with set_seed"."""
    import subprocess
    import sys

    import mistralrs

    row = adapter.with_specials([0.0, 0.0, 0.0, 0.0])
    s = Settings(prompt=(FIRST,))
    with adapter.engine(row) as e:
        first = e.draws(s, 40, per_request=1).tolist()
        runs = [adapter.Engine.__new__(adapter.Engine) for _ in range(3)]
        for r, seed in zip(runs, (None, 0, 1)):
            r.m, r.row, r.dir = mistralrs, e.row, e.dir
            r.runner = mistralrs.Runner(which=mistralrs.Which.GGUF(quantized_model_id=str(e.dir),
                                                                   quantized_filename="m.gguf"),
                                        no_paged_attn=True, **({} if seed is None else {"seed": seed}))
            assert r.draws(s, 40, per_request=1).tolist() == first, f"seed {seed}: another stream"
        code = ("import mistralrs as m\ntry:\n    m.Runner(which=m.Which.GGUF(quantized_model_id=%r, "
                "quantized_filename='m.gguf'), no_paged_attn=True, seed=0)\nexcept ValueError as e:\n    print(e)"
                % str(e.dir))
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "cannot seed the CPU rng" in out.stdout, out.stdout + out.stderr[-2000:]
    recording.table("peer_engines", {**(recording.TABLES.get("peer_engines") or {}), "mistral.rs": ENGINE})


@pytest.mark.parametrize("finding", [f for f in FINDINGS if f.engine == "mistral.rs"], ids=lambda f: f.id)
def test_mistralrs_finding_still_reproduces(finding):
    """Each mistral.rs ledger entry still occurs on the pinned release (an upstream change fails here)."""
    got, want = finding.replay()
    assert got == finding.llama_output, f"mistral.rs now gives {got}, recorded {finding.llama_output}"
    assert want == finding.oracle_output, f"the reference now gives {want}, recorded {finding.oracle_output}"
