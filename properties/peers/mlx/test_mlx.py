"""The real peer: MLX's sampler (mlx-lm 0.32.2 on mlx 0.32.4's CPU build) against its named
variant ``oracle.engines.mlx`` and the llama.cpp oracle.

- survivors and law: the chain ``make_sampler`` builds (top_p, min_p, top_k, after the
  processors ``make_logits_processors`` builds) on hypothesis rows, judged by the peers' one judge
  (``legality.judge``: per tie class a kept count inside the variant's bracket at thresholds
  moved by the float32 allowance, and softmax(survivors / t) within 1e-6 as sorted values);
- the matrix's MLX column is the real engine: every matrix setting, on the matrix's own cases;
- every difference from llama.cpp has a witness replayed on the real engine (``WITNESSES``);
- conforming-member properties: truncation ≡ masking, no token of probability 0 ever drawn,
  the law of seeded draws (χ² gate at the suite's per-test level α = 1e-10: a correct engine
  fails one run with probability <= 1e-10; the seed is fixed, so a run repeats);
- XTC (probability 1: the cut always happens) against the variant and llama.cpp's cut.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from oracle.engines import Settings
from oracle.engines import llama_cpp as o_llama
from oracle.engines import mlx as o_mlx
from properties import recording
from properties.peers.llama_cpp.findings import FINDINGS
from properties.engines.matrix import SETTINGS, cases, not_expressible
from properties.peers.mlx import adapter

_WHY = adapter.available()
if _WHY is not None:
    pytest.skip(_WHY, allow_module_level=True)

from properties.peers.mlx.legality import judge, outside  # noqa: E402
from properties.stats import ALPHA_PER_TEST, gof_samples  # noqa: E402

pytestmark = pytest.mark.peer
ENGINE = f"mlx {adapter.PINNED['mlx']} / mlx-lm {adapter.PINNED['mlx-lm']} (CPU)"


@st.composite
def rows(draw, max_vocab: int = 48) -> np.ndarray:
    """A 1/8 grid (ties and exact boundaries common) or a wide normal row, in float32."""
    n = draw(st.integers(2, max_vocab), label="vocab")
    rng = np.random.default_rng(draw(st.integers(0, 2**16), label="seed"))
    if draw(st.booleans(), label="grid"):
        levels = rng.choice(np.arange(-40, 41), size=draw(st.integers(1, 40), label="levels"), replace=False) / 8
        return rng.choice(levels, size=n).astype(np.float32)
    return (rng.standard_normal(n) * draw(st.sampled_from([0.5, 2.0, 6.0]), label="scale")).astype(np.float32)


@st.composite
def mlx_settings(draw, n: int) -> Settings:
    hist = st.lists(st.integers(0, n - 1), max_size=40).map(tuple)
    return Settings(
        temperature=draw(st.sampled_from([1.0, 0.8, 0.5, 1.5]), label="t"),
        top_k=draw(st.sampled_from([k for k in (0, 1, 2, 5, 40) if k < n]), label="top_k"),
        top_p=draw(st.sampled_from([1.0, 0.95, 0.8, 0.5]), label="top_p"),
        min_p=draw(st.sampled_from([0.0, 0.05, 0.2]), label="min_p"),
        repetition_penalty=draw(st.sampled_from([1.0, 1.1, 0.8]), label="rep"),
        presence_penalty=draw(st.sampled_from([0.0, 0.5]), label="presence"),
        frequency_penalty=draw(st.sampled_from([0.0, 0.25]), label="frequency"),
        prompt=draw(hist, label="prompt"), output=draw(hist, label="output"),
        repeat_last_n=draw(st.sampled_from([64, 20, 3, 0]), label="window"))  # 0: tokens[-0:], the whole history


def _judged(row: np.ndarray, s: Settings, what: str) -> None:
    real = adapter.chain(row, s)
    verdict, kept = judge(row.astype(np.float64), s, real)
    assert verdict.ok, f"{what}: MLX's answer is not legal: {verdict.why}\nrow {row.tolist()}\n{s}\nkept {kept}"


@settings(max_examples=max(20, settings.default.max_examples))
@given(data=st.data())
def test_mlx_chain_is_its_variant(data):
    """make_sampler's chain after the penalties: survivors in the variant's bracket, law within 1e-6."""
    row = data.draw(rows(), label="row")
    s = data.draw(mlx_settings(row.size), label="settings")
    _judged(row, s, "make_sampler chain")
    recording.note("peer:mlx", "chain≡variant", "float32")


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
@settings(max_examples=max(10, settings.default.max_examples // 2))
@given(data=st.data())
def test_mlx_half_precision_survivors(dtype, data):
    """MLX's half-precision path (logits, penalties and log-softmax in the dtype; top_p's
    probabilities in float32): the kept set inside the variant's bracket at the dtype's allowance,
    per class of scores the dtype cannot tell apart."""
    import ml_dtypes

    np_dtype = np.float16 if dtype == "float16" else ml_dtypes.bfloat16
    row = data.draw(rows(), label="row").astype(np_dtype).astype(np.float32)  # representable in the dtype
    s = data.draw(mlx_settings(row.size), label="settings")
    real = adapter.chain(row, s, dtype=dtype)
    bad = outside(row.astype(np.float64), s, real, dtype)
    assert not bad, (f"{dtype}: kept counts per class (variant fewer, MLX, variant more) outside the bracket: {bad}\n"
                     f"row {row.tolist()}\n{s}\nMLX keeps {np.flatnonzero(np.isfinite(real)).tolist()}")
    recording.note("peer:mlx", "half-precision survivors", dtype)


@pytest.mark.parametrize("name", [n for n, s in SETTINGS.items() if not not_expressible(("llama.cpp", "mlx"), s)])
@settings(max_examples=max(10, settings.default.max_examples // 2))
@given(data=st.data())
def test_matrix_mlx_column_is_the_real_engine(name, data):
    """On the cross-engine matrix's own cases (1/8 grid, histories split into prompt and output),
    the real engine answers as the variant the matrix's MLX column is computed from."""
    s = SETTINGS[name]
    logits, prompt, output = data.draw(cases(s, 64 if s.top_k else 24), label="case")
    row = np.asarray(logits, dtype=np.float32)
    _judged(row, s.with_(prompt=prompt, output=output), f"matrix setting {name}")
    recording.note("peer:mlx", "matrix column", "float32")


# every difference from llama.cpp, with its witness: (name, logits, settings, what MLX keeps,
# what llama.cpp keeps); each is replayed on the real engine and on both variants
WITNESSES = [
    ("top_p before top_k: top_p measures the full mass, llama.cpp the renormalised top-k mass",
     [np.log(0.5), np.log(0.2), np.log(0.2), np.log(0.1)], Settings(top_k=2, top_p=0.6), [0, 1], [0]),
    ("top_p keeps every token tied with its crossing token",
     [2.0, 1.0, 1.0, 0.0], Settings(top_p=0.7), [0, 1, 2], [0, 1]),
    ("temperature last (as llama.cpp): top_p on untempered mass",
     [1.0, 0.0, -1.0], Settings(temperature=0.5, top_p=0.8), [0, 1], [0, 1]),
    ("penalty window: MLX's default context size is 20 tokens, llama.cpp's penalty_last_n 64 - the same "
     "window when the user sets both (here 3)",
     [1.0, 1.0, 0.0], Settings(repetition_penalty=2.0, prompt=(0, 2, 2, 2)), [0, 1, 2], [0, 1, 2]),
]


@pytest.mark.parametrize("witness", WITNESSES, ids=[w[0][:40] for w in WITNESSES])
def test_difference_from_llama_cpp_has_a_witness(witness):
    name, logits, s, mlx_keeps, llama_keeps = witness
    s = s.with_(repeat_last_n=3) if s.history else s
    row = np.asarray(logits, dtype=np.float32)
    real = np.flatnonzero(np.isfinite(adapter.chain(row, s))).tolist()
    x = row.astype(np.float64)
    assert real == mlx_keeps, f"{name}: MLX keeps {real}, recorded {mlx_keeps}"
    assert np.flatnonzero(o_mlx.distribution(x, s) > 0).tolist() == mlx_keeps, f"{name}: the variant disagrees"
    assert np.flatnonzero(o_llama.distribution(x, s) > 0).tolist() == llama_keeps, f"{name}: llama.cpp moved"
    _judged(row, s, name)


def test_top_k_at_least_vocab_is_refused():
    """llama.cpp (and every other engine) treats top_k >= n as no truncation; MLX raises."""
    with pytest.raises(ValueError, match="top_k"):
        adapter.chain(np.zeros(4, dtype=np.float32), Settings(top_k=4))
    assert (o_mlx.distribution(np.zeros(4), Settings(top_k=4)) == 0.25).all()  # the variant's no-op


@settings(max_examples=max(10, settings.default.max_examples // 2))
@given(data=st.data())
def test_mlx_truncation_equals_masking(data):
    """A row with -inf entries: the real chain keeps none of them and answers on the rest as on
    the row without them (penalised ids renumbered)."""
    row = data.draw(rows(24), label="row")
    masked_ids = data.draw(st.sets(st.integers(0, row.size - 1), max_size=row.size - 1), label="masked")
    keep = np.array([i for i in range(row.size) if i not in masked_ids])
    s = data.draw(mlx_settings(keep.size), label="settings").with_(prompt=(), output=())
    full = row.copy()
    full[list(masked_ids)] = -np.inf
    a, b = adapter.chain(full, s), adapter.chain(row[keep], s)
    assert not np.isfinite(a[list(masked_ids)]).any(), "a -inf token survived"
    assert np.array_equal(np.isfinite(a[keep]), np.isfinite(b)), f"survivors differ: {a[keep]} vs {b}"
    fin = np.isfinite(b)
    assert np.abs(a[keep][fin] - b[fin]).max(initial=0.0) <= 4 * np.finfo(np.float32).eps * (1 + np.abs(b[fin]).max(initial=0.0))
    recording.note("peer:mlx", "truncation≡masking", "float32")


LAW_CASES = [
    ("T0.8 top_p0.9", [2.625, -4.625, -0.875, -3.5, -2.125, 2.75, -0.25, 0.625, 0.75, 0.75, 3.875, 1.875, 1.875],
     Settings(temperature=0.8, top_p=0.9)),
    ("T1.5 k5 min_p0.05", [0.1 * i for i in range(24)], Settings(temperature=1.5, top_k=5, min_p=0.05)),
    ("T1 rep1.3 window", [0.5, 0.25, 0.0, -0.25, 1.0, 2.0], Settings(repetition_penalty=1.3, prompt=(0, 5, 1))),
    ("T-1 (negative: the law of -l)", [0.0, 0.5, 1.0, 1.5], Settings(temperature=-1.0)),
]
SEED = 0


@pytest.mark.parametrize("case", LAW_CASES, ids=[c[0] for c in LAW_CASES])
def test_mlx_draws_follow_the_variant_law(case):
    """Seeded draws (seed 0) of the real sampler: never a token of probability 0, and the χ² gate
    (N = 100,000; false-failure probability <= 1e-10 per run) against the variant's law."""
    name, logits, s = case
    row = np.asarray(logits, dtype=np.float32)
    law = o_mlx.distribution(row.astype(np.float64), s)
    got = adapter.draws(row, s, 100_000, SEED)
    zero = sorted(set(got[law[got] == 0].tolist()))
    assert not zero, f"{name}: drew tokens {zero} of probability 0"
    res = gof_samples(got, law, ALPHA_PER_TEST)
    assert res.passed, f"{name}: {res.describe()}"
    recording.note("peer:mlx", "law of the draw", "float32")


@settings(max_examples=max(10, settings.default.max_examples // 2))
@given(row=rows(32), threshold=st.sampled_from([0.05, 0.1, 0.2]))
def test_mlx_xtc_cut_is_its_variant(row, threshold):
    """XTC at probability 1 (after no other filter): MLX drops every token whose p exceeds the
    smallest p above the threshold, keeping every token tied with that one; unjudged where the
    threshold or that smallest p sits within the float32 softmax's error of another p."""
    x = row.astype(np.float64)
    lp = x - x.max() - np.log(np.exp(x - x.max()).sum())
    p = np.exp(lp)
    window = 64 * np.finfo(np.float32).eps * (1 + np.abs(lp).max())  # relative: softmax's float32 error
    near = np.abs(p / threshold - 1) <= window
    above = p[p > threshold]
    if near.any() or (above.size and np.any((np.abs(p / above.min() - 1) <= window) & (p != above.min()))):
        return
    real = adapter.chain(row, Settings(), xtc=(1.0, threshold))
    want = o_mlx.xtc_keep(lp, threshold)
    assert np.array_equal(np.isfinite(real), want), f"XTC kept {np.flatnonzero(np.isfinite(real))}, variant {np.flatnonzero(want)}"
    recording.note("peer:mlx", "xtc≡variant", "float32")


def test_xtc_differs_from_llama_cpp_where_witnessed():
    """Witness: p = (0.4, 0.3, 0.3) at threshold 0.1 - llama.cpp drops the head down to ONE of the
    tied least-above tokens (sorted order decides), MLX keeps both tied ones."""
    from oracle.candidates import TokenDataArray
    from oracle.samplers.xtc import apply_xtc_cut

    row = np.log(np.array([0.4, 0.3, 0.3], dtype=np.float32))
    real = np.flatnonzero(np.isfinite(adapter.chain(row, Settings(), xtc=(1.0, 0.1)))).tolist()
    cur = TokenDataArray.from_logits(row.astype(np.float64))
    apply_xtc_cut(cur, 0.1, 1)
    assert real == [1, 2] and cur.size == 1, (real, cur.ids.tolist())


def test_versions_recorded():
    recording.table("peer_engines", {**(recording.TABLES.get("peer_engines") or {}), "mlx": ENGINE})
    assert adapter.versions() == adapter.PINNED


@pytest.mark.parametrize("finding", [f for f in FINDINGS if f.engine == "mlx"], ids=lambda f: f.id)
def test_mlx_finding_still_reproduces(finding):
    """Each MLX ledger entry still occurs on the pinned release (an upstream change fails here)."""
    got, want = finding.replay()
    assert got == finding.llama_output, f"MLX now gives {got}, recorded {finding.llama_output}"
    assert want == finding.oracle_output, f"the reference now gives {want}, recorded {finding.oracle_output}"


def test_a_wide_half_precision_allowance_never_turns_top_p_off():
    """Pinned from a nightly (seed 4): a bfloat16 row with |l| up to 16.3 gives δ = 0.506 > p = 0.5,
    and the bracket's fewer end clamped p to 0, which MLX reads as top_p off (every token kept), so
    MLX keeping only its 0.99-probability top token was called outside. The fewer end now stays at
    the smallest positive p. Both ways: a row that drops the top token is still outside."""
    import ml_dtypes

    row = np.array([2.0735052, 4.929709, 1.9826225, -7.8189435, 5.432135, 2.6782475, -3.2217195, 3.4867086,
                    2.1874344, 1.764795, 0.17053345, 3.280278, -4.4187245, -0.97745967, -2.892716, 3.5930772,
                    0.23833264, -1.7547405, -4.6914506, -1.5431534, 0.04885308, -1.6536174, 7.764383, 6.0403457,
                    -16.266975, -11.33408, -1.0486325, -2.5331426, 1.281858, 1.3039316, 12.707032, -6.6721244,
                    -2.26563], np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)
    s = Settings(temperature=1.0, top_k=0, top_p=0.5, min_p=0.0, typical_p=1.0, epsilon=0.0, eta=0.0,
                 repetition_penalty=1.0, presence_penalty=0.0, frequency_penalty=0.0, prompt=(), output=(),
                 min_tokens_to_keep=1, repeat_last_n=64)
    top_only = np.full(row.size, -np.inf)
    top_only[30] = 0.0
    assert outside(row.astype(np.float64), s, top_only, "bfloat16") == {}
    no_top = np.full(row.size, -np.inf)
    no_top[22] = 0.0
    assert outside(row.astype(np.float64), s, no_top, "bfloat16") != {}
