"""Chains of samplers for properties 2 (truncation ≡ masking) and 5 (GPU prefix, CPU suffix).

Chain inputs are fp32-exact: logits on a 2^-8 grid within ±64, temperatures powers of two,
penalty and bias values multiples of 1/8, repeat in {1/2, 2}. Every transform is then exact in
fp32, so the only legitimate disagreement between a masked fp32 chain and the truncating float64
oracle is a filter boundary, which the per-step bracket (``SamplerRecord.must_may``) states.
Where no step was ambiguous, the final distributions must agree to float64 rounding.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from oracle.candidates import TokenDataArray
from properties.samplers.records import RECORDS_BY_NAME
from properties.samplers.record import SamplerRecord
from properties.samplers.brackets import describe_set_violation
from properties.samplers.strategies import FAMILIES, make_logits, vocab_sizes

CHAIN_SAMPLERS = ("logit_bias", "penalties", "top_n_sigma", "top_k", "typical", "top_p", "min_p", "xtc", "temp")
DEFAULT_CHAIN = ("penalties", "top_k", "top_p", "min_p", "temp")  # edskypmxt with the default no-ops left out


@dataclass
class Step:
    record: SamplerRecord
    params: dict  # [1]-shaped arrays, as gpu_impl takes them

    def scalar(self) -> dict:
        return {k: (v[0].item() if v.ndim == 1 else v[0]) for k, v in self.params.items()}

    def __repr__(self) -> str:
        shown = {k: np.asarray(v)[0].tolist() for k, v in self.params.items()}
        return f"{self.record.name}{shown}"


_EIGHTHS = st.integers(-8, 8).map(lambda i: i / 8)
_EXACT = {
    "temp": lambda v: st.fixed_dictionaries({"t": st.sampled_from([0.25, 0.5, 1.0, 2.0, 4.0])}),
    "penalties": lambda v: st.integers(0, 6).flatmap(lambda h: st.fixed_dictionaries({
        "history": st.lists(st.integers(0, v - 1), min_size=h, max_size=h), "last_n": st.sampled_from([0, 3, 64]),
        "repeat": st.sampled_from([0.5, 1.0, 2.0]), "freq": _EIGHTHS, "present": _EIGHTHS})),
    "logit_bias": lambda v: st.fixed_dictionaries({
        "bias_ids": st.lists(st.integers(0, v - 1), min_size=4, max_size=4),
        "bias_vals": st.lists(st.one_of(st.integers(-32, 32).map(lambda i: i / 8), st.just(-np.inf)),
                              min_size=4, max_size=4)}),
}


def _as_batch1(params: dict) -> dict:
    return {k: np.asarray([v]) for k, v in params.items()}


@st.composite
def steps(draw, names: tuple[str, ...], vocab: int) -> list[Step]:
    out = []
    for name in names:
        rec = RECORDS_BY_NAME[name]
        if name in _EXACT:
            out.append(Step(rec, _as_batch1(draw(_EXACT[name](vocab), label=name))))
        else:
            out.append(Step(rec, draw(rec.params(1, vocab), label=name)))
    return out


@st.composite
def chain_cases(draw, names: tuple[str, ...] | None = None, max_vocab: int = 4096):
    """(row float32 [1, V], steps): a drawn or given chain on a grid-snapped row."""
    if names is None:
        names = tuple(draw(st.lists(st.sampled_from(CHAIN_SAMPLERS), min_size=1, max_size=5), label="chain"))
    vocab = draw(vocab_sizes(max_vocab), label="vocab")
    family = draw(st.sampled_from([f for f in FAMILIES if f not in ("huge", "past_fp16")]), label="family")
    seed = draw(st.integers(0, 2**16), label="seed")
    row = make_logits(family, vocab, seed).astype(np.float64)
    row = np.where(np.isfinite(row), np.clip(np.round(row * 256) / 256, -64, 64), -np.inf)
    return row.astype(np.float32)[None, :], draw(steps(names, vocab), label="steps")


def oracle_chain(row: np.ndarray, chain: list[Step], masked_handoff: bool = False) -> TokenDataArray:
    """The truncating oracle chain; ``masked_handoff`` rebuilds the array from the dense masked
    row after every sampler, -inf entries included, as llama.cpp's CPU receives a backend row.

    The input's own -inf entries are dropped first: a masked row cannot say whether -inf was a
    candidate, and llama.cpp's xtc (size >= 2, min_keep, p >= threshold with p = 0) and
    temp_ext (ln size) give different answers when it was."""
    cur = TokenDataArray.from_logits(row.astype(np.float64))
    cur.keep(np.flatnonzero(np.isfinite(cur.logits)))
    for step in chain:
        step.record.oracle({**step.scalar(), "n_vocab": row.size}).apply(cur)
        if masked_handoff:
            cur = TokenDataArray.from_logits(cur.dense_logits(row.size))
    return cur


def impl_prefix(impl, row: np.ndarray, chain: list[Step]) -> tuple[np.ndarray, bool, str | None]:
    """Run ``chain`` in the impl, checking every step against the truncating oracle's bracket on
    the impl's own input. Returns (masked row, whether any boundary was ambiguous, violation)."""
    state, ambiguous = row, False
    for step in chain:
        out = np.asarray(step.record.impl(impl, state, step.params), dtype=np.float32)
        x64 = state[0].astype(np.float64)
        if step.record.kind == "filter":
            must, may = step.record.must_may(x64, step.scalar(), truncated=True)
            ambiguous |= bool((may & ~must).any())
            why = describe_set_violation(np.isfinite(out[0]), must, may)
            if why:
                return out, ambiguous, f"step {step!r}: {why}"
        else:
            exact = step.record.run_oracle(x64, step.scalar(), truncated=True).dense_logits(row.shape[1])
            if not np.array_equal(out[0].astype(np.float64), exact):
                bad = int(np.flatnonzero(out[0].astype(np.float64) != exact)[0])
                return out, ambiguous, f"step {step!r}: fp32-exact transform differs at id {bad}: {out[0][bad]} vs {exact[bad]}"
        state = out
    return state, ambiguous, None


def compare(d_got: np.ndarray, d_want: np.ndarray, ambiguous: bool) -> str | None:
    """None if the distributions agree (exactly up to float64 rounding, or - only after an
    ambiguous boundary - in support), else the discrepancy."""
    same_support = np.array_equal(d_got > 0, d_want > 0)
    if not same_support:
        if ambiguous:
            return None
        diff = np.flatnonzero((d_got > 0) != (d_want > 0))
        return f"supports differ at ids {diff[:6].tolist()} with no ambiguous boundary on the way"
    err = np.abs(d_got - d_want).max()
    if err > 1e-12:
        return f"same support but probabilities differ by {err:.3g}"
    return None


def dense_distribution(masked_row: np.ndarray) -> np.ndarray:
    return TokenDataArray.from_logits(masked_row.astype(np.float64)).distribution()
