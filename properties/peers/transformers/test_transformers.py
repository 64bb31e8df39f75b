"""The real peer: HF transformers' warpers (torch on CPU) against ``oracle.engines.transformers``.

Each warper and HF's own ``generate``-style chain (``GenerationMixin._get_logits_processor``:
processors, then temperature, top_k, top_p, min_p, typical, epsilon, eta) runs on
hypothesis-drawn rows (a 1/8 grid, so ties and exact boundaries are common; some -inf) in
float64 and float32 torch. Verdicts:

- zeroed (-inf) sets: per class of equal pre-truncation scores, HF's kept count lies between the
  oracle's at thresholds moved by δ towards "keep fewer" and "keep more"; δ = 0 in float64 (exact
  boundaries such as two equal logits at top_p = 0.5 are where "<=" versus "<" shows, and an
  independent float64 rounding landing on a boundary has probability ~1e-16 per example); in
  float32 δ = (2n + log2 n + 8 + max|score|)·u32, the fp32 cumulative-sum and exp rounding. Equal scores are interchangeable because
  ``torch.sort`` is not stable on CPU (which tied token top_p / typical drop is unspecified);
- probabilities: where the class counts equal the oracle's, the sorted softmax of HF's output
  matches the oracle's distribution within 1e-12 (float64) / 1e-6 (float32);
- transforms (temperature, repetition penalty): every value within 2 u of the oracle's.
"""
from __future__ import annotations

import math
import types

import numpy as np
import pytest
from hypothesis import given, strategies as st

from oracle.engines import Settings
from oracle.engines import transformers as o_hf
from properties import recording
from properties.numerics import unit_roundoff
from properties.peers.kept_set import class_counts, tie_classes
from properties.peers.transformers.legality import check_kept, delta_for

pytestmark = [pytest.mark.peer]
# The peer is imported when this module's first test runs, not at collection: importing torch and
# transformers costs ~7 s, which every pytest-xdist worker would pay while collecting.
torch = lp = GenerationConfig = GenerationMixin = None


@pytest.fixture(scope="module", autouse=True)
def _peer() -> None:
    global torch, lp, GenerationConfig, GenerationMixin
    try:
        import torch
        from transformers import GenerationConfig
        from transformers.generation import logits_process as lp
        from transformers.generation.utils import GenerationMixin
    except Exception as exc:  # ImportError, or a torch that fails to load
        pytest.skip(f"transformers/torch not importable ({exc}); pip install 'logitcheck[engines]'")

DTYPES = ("float64", "float32")
RESULTS: dict = {}

# name: (HF factory(params), oracle(row, params), params strategy, threshold fields and the
# direction in which growing each one keeps more tokens)
_mk = st.sampled_from([1, 1, 2, 3])
WARPERS = {
    "TopKLogitsWarper": (lambda p: lp.TopKLogitsWarper(p["k"], min_tokens_to_keep=p["mk"]),
                         lambda r, p: o_hf.top_k(r, p["k"], p["mk"]),
                         st.fixed_dictionaries({"k": st.integers(1, 12), "mk": _mk}), {}),
    "TopPLogitsWarper": (lambda p: lp.TopPLogitsWarper(p["p"], min_tokens_to_keep=p["mk"]),
                         lambda r, p: o_hf.top_p(r, p["p"], p["mk"]),
                         st.fixed_dictionaries({"p": st.sampled_from([0.0, 0.3, 0.5, 0.8, 0.9, 0.95, 1.0]), "mk": _mk}),
                         {"p": +1}),
    "MinPLogitsWarper": (lambda p: lp.MinPLogitsWarper(p["m"], min_tokens_to_keep=p["mk"]),
                         lambda r, p: o_hf.min_p(r, p["m"], p["mk"]),
                         st.fixed_dictionaries({"m": st.sampled_from([0.0, 0.05, 0.1, 0.25, 0.5, 1.0]), "mk": _mk}),
                         {"m": -1}),
    "TypicalLogitsWarper": (lambda p: lp.TypicalLogitsWarper(p["mass"], min_tokens_to_keep=p["mk"]),
                            lambda r, p: o_hf.typical(r, p["mass"], p["mk"]),
                            st.fixed_dictionaries({"mass": st.sampled_from([0.2, 0.5, 0.9, 0.95]), "mk": _mk}),
                            {"mass": +1}),
    "EpsilonLogitsWarper": (lambda p: lp.EpsilonLogitsWarper(p["eps"], min_tokens_to_keep=p["mk"]),
                            lambda r, p: o_hf.epsilon(r, p["eps"], p["mk"]),
                            st.fixed_dictionaries({"eps": st.sampled_from([3e-4, 0.01, 0.05, 0.2]), "mk": _mk}),
                            {"eps": -1}),
    "EtaLogitsWarper": (lambda p: lp.EtaLogitsWarper(p["eps"], min_tokens_to_keep=p["mk"]),
                        lambda r, p: o_hf.eta(r, p["eps"], p["mk"]),
                        st.fixed_dictionaries({"eps": st.sampled_from([3e-4, 0.01, 0.05, 0.2]), "mk": _mk}),
                        {"eps": -1}),
}
TRANSFORMS = {
    "TemperatureLogitsWarper": (lambda p: lp.TemperatureLogitsWarper(p["t"]), lambda r, p: o_hf.temperature(r, p["t"]),
                                st.fixed_dictionaries({"t": st.sampled_from([0.25, 0.5, 0.8, 1.5, 2.0])})),
    "RepetitionPenaltyLogitsProcessor": (lambda p: lp.RepetitionPenaltyLogitsProcessor(p["r"]),
                                         lambda r, p: o_hf.repetition_penalty(r, p["ids"], p["r"]),
                                         st.fixed_dictionaries({"r": st.sampled_from([0.5, 0.8, 1.1, 1.3, 2.0])})),
}


@st.composite
def rows(draw, max_vocab: int = 40) -> np.ndarray:
    v = draw(st.integers(1, max_vocab), label="vocab")
    vals = draw(st.lists(st.one_of(st.integers(-48, 48).map(lambda i: i / 8), st.just(-math.inf)),
                         min_size=v, max_size=v), label="logits")
    row = np.asarray(vals)
    if not np.isfinite(row).any():
        row[draw(st.integers(0, v - 1))] = 0.0
    return row


def run_hf(proc, row: np.ndarray, dtype: str, ids=()) -> np.ndarray:
    scores = torch.tensor(row[None, :], dtype=getattr(torch, dtype))
    input_ids = torch.tensor([list(ids) or [0]], dtype=torch.long)
    return proc(input_ids if ids else input_ids[:, :0], scores)[0].double().numpy()


def judge(name: str, dtype: str, hf_out: np.ndarray, key: np.ndarray, oracle, thresholds: dict, params: dict,
          delta: float) -> None:
    """``check_kept``'s verdict asserted, its outcome tallied in the report's table."""
    verdict = check_kept(name, dtype, hf_out, key, oracle, thresholds, params, delta)
    stats = RESULTS.setdefault(f"{name}[{dtype}]", {"examples": 0, "identical_sets": 0, "tie_permuted": 0,
                                                    "boundary_bracketed": 0, "max_prob_diff": 0.0})
    if verdict.outcome != "rejected":
        stats["examples"] += 1
        stats[verdict.outcome] += 1
        stats["max_prob_diff"] = max(stats["max_prob_diff"], verdict.prob_diff)
    assert verdict.why is None, verdict.why
    recording.table("peer_transformers", RESULTS)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(WARPERS))
@given(data=st.data())
def test_hf_warper_matches_variant(name, dtype, data):
    factory, oracle_fn, strategy, thresholds = WARPERS[name]
    row = data.draw(rows(), label="row")
    params = data.draw(strategy, label="params")
    hf_out = run_hf(factory(params), row, dtype)
    judge(name, dtype, hf_out, row, lambda p: oracle_fn(row, p), thresholds, params, delta_for(dtype, row))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", sorted(TRANSFORMS))
@given(data=st.data())
def test_hf_transform_matches_variant(name, dtype, data):
    factory, oracle_fn, strategy = TRANSFORMS[name]
    row = data.draw(rows(), label="row")
    params = data.draw(strategy, label="params")
    params["ids"] = tuple(data.draw(st.lists(st.integers(0, row.size - 1), min_size=1, max_size=12), label="ids"))
    got = run_hf(factory(params), row, dtype, params["ids"])
    want = oracle_fn(row, params)
    assert np.array_equal(np.isinf(got), np.isinf(want)), f"{name}[{dtype}]: -inf positions differ"
    fin = np.isfinite(want)
    err = np.abs(got[fin] - want[fin]) / np.maximum(np.abs(want[fin]), 2.0**-1000)
    worst = float(err.max() / unit_roundoff(dtype)) if err.size else 0.0
    assert worst <= 2.0, f"{name}[{dtype}]: worst error {worst:.3g} u (model: 2 u, one rounding of the " \
                         f"parameter and one of the operation)"
    stats = RESULTS.setdefault(f"{name}[{dtype}]", {"examples": 0, "worst_u": 0.0})
    stats["examples"] += 1
    stats["worst_u"] = max(stats["worst_u"], worst)
    recording.table("peer_transformers", RESULTS)


def hf_chain(s: Settings):
    """HF's own generate-time processor list for these settings (its order, its defaults)."""
    fake = type("Generator", (), {"config": types.SimpleNamespace(is_encoder_decoder=False),
                                  "_merge_criteria_processor_list": GenerationMixin._merge_criteria_processor_list,
                                  "_get_logits_processor": GenerationMixin._get_logits_processor})()
    cfg = GenerationConfig(do_sample=True, temperature=s.temperature, top_k=s.top_k or None,
                           top_p=s.top_p, min_p=s.min_p or None, typical_p=s.typical_p,
                           epsilon_cutoff=s.epsilon, eta_cutoff=s.eta, repetition_penalty=s.repetition_penalty)
    return fake._get_logits_processor(cfg, input_ids_seq_length=len(s.history), device="cpu")


CHAIN_SETTINGS = st.builds(
    Settings, temperature=st.sampled_from([0.5, 0.8, 1.0, 2.0]), top_k=st.sampled_from([0, 2, 5, 40]),
    top_p=st.sampled_from([1.0, 0.95, 0.8, 0.5]), min_p=st.sampled_from([0.0, 0.05, 0.2]),
    repetition_penalty=st.sampled_from([1.0, 1.1, 0.8]))


@pytest.mark.parametrize("dtype", DTYPES)
@given(data=st.data())
def test_hf_generate_chain_matches_variant(dtype, data):
    """temperature -> top_k -> top_p -> min_p with a repetition penalty, as generate builds it."""
    row = data.draw(rows(), label="row")
    s = data.draw(CHAIN_SETTINGS, label="settings")
    s = s.with_(prompt=tuple(data.draw(st.lists(st.integers(0, row.size - 1), min_size=1, max_size=12), label="ids")))
    try:
        chain = hf_chain(s)
    except (AttributeError, TypeError) as exc:  # the private builder changed shape
        pytest.skip(f"transformers' _get_logits_processor is not callable this way any more: {exc}")
    names = [type(p).__name__ for p in chain]
    assert names == sorted(names, key=["RepetitionPenaltyLogitsProcessor", "TemperatureLogitsWarper",
                                       "TopKLogitsWarper", "TopPLogitsWarper", "MinPLogitsWarper"].index), \
        f"generate's order changed: {names}"
    hf_out = run_hf(chain, row, dtype, s.history)
    key = o_hf.temperature(o_hf.repetition_penalty(row, s.history, s.repetition_penalty), s.temperature)
    thresholds = {"p": +1} if s.top_p < 1 else {}
    if s.min_p > 0:
        thresholds["m"] = -1
    judge("generate-chain", dtype, hf_out, key, lambda p: o_hf.processed(row, s.with_(top_p=p["p"], min_p=p["m"])),
          thresholds, {"p": s.top_p, "m": s.min_p}, delta_for(dtype, key))


# Exact boundaries (where "<=" versus "<" and tie handling show): equal logits whose tail mass is
# exactly 1 - p, and transformers' own documented rows (probabilities [0.3, 0.1, 0.1, 0.5] at
# p = 0.8 keep {0.5, 0.3}; [0.15, 0.3, 0.3, 0.25] keep {0.3, 0.3, 0.25}).
BOUNDARY_ROWS = [([0.0, 0.0], 0.5), ([0.0] * 4, 0.5), ([0.0] * 4, 0.75), ([1.0, 1.0, 0.0], 0.0),
                 (np.log([0.3, 0.1, 0.1, 0.5]).tolist(), 0.8), (np.log([0.15, 0.3, 0.3, 0.25]).tolist(), 0.8)]


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("row, p", BOUNDARY_ROWS)
def test_hf_top_p_exact_boundaries(row, p, dtype):
    row = np.asarray(row)
    hf_out = run_hf(lp.TopPLogitsWarper(p), row, dtype)
    want = o_hf.top_p(row.astype(getattr(np, dtype)).astype(np.float64), p)
    cls, _ = tie_classes(row, dtype)
    assert np.array_equal(class_counts(np.isfinite(hf_out), cls), class_counts(np.isfinite(want), cls)), \
        f"TopPLogitsWarper({p})[{dtype}] on {row.tolist()}: HF keeps {np.flatnonzero(np.isfinite(hf_out)).tolist()}, " \
        f"the variant {np.flatnonzero(np.isfinite(want)).tolist()}"
