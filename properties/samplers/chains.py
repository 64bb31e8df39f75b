"""Chains of samplers for properties 2 (truncation ≡ masking) and 5 (GPU prefix, CPU suffix).

Chain inputs are fp32-exact: logits on a 2^-8 grid within ±64, temperatures powers of two,
penalty and bias values multiples of 1/8, repeat in {1/2, 2}. Every transform is then exact in
fp32, so the only legitimate disagreement between a masked fp32 chain and the truncating float64
oracle is a filter boundary, which the per-step bracket (``SamplerRecord.must_may``) states.

Every step is judged on the implementation's own input: the oracle is re-run on the survivors
the implementation kept so far (``impl_prefix``), so a legal choice at an ambiguous boundary
never stops the judging of the steps after it. Per filter step: the kept set inside the
bracket, the survivor *count* inside the oracle's counts at the bracket's variants (ties choose
which tokens survive, not how many: ``checks.count_violation``), and the survivors'
distribution unchanged (a filter only removes tokens). Per transform: exact (or, for rows off
the grid, within the record's error model). Where the implementation kept exactly the oracle's
tokens at every step, its final distribution must equal the whole oracle chain's to float64
rounding.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from hypothesis import strategies as st

from oracle.candidates import TokenDataArray
from properties.numerics import U64, gamma
from properties.measure import elementwise_error
from properties.samplers.brackets import describe_set_violation
from properties.samplers.checks import count_violation
from properties.samplers.records import RECORDS, RECORDS_BY_NAME
from properties.samplers.record import SamplerRecord
from properties.samplers.strategies import FAMILIES, make_logits, vocab_sizes

# the records with a chain role, in common_sampler's order
_MEMBERS = sorted((r for r in RECORDS if r.chain is not None), key=lambda r: r.chain.position)
CHAIN_SAMPLERS = tuple(r.name for r in _MEMBERS)
DEFAULT_CHAIN = tuple(r.name for r in _MEMBERS if r.chain.default)  # edskypmxt with the default no-ops left out


@dataclass
class Step:
    record: SamplerRecord
    params: dict  # [1]-shaped arrays, as gpu_impl takes them

    def scalar(self) -> dict:
        return {k: (v[0].item() if v.ndim == 1 else v[0]) for k, v in self.params.items()}

    def __repr__(self) -> str:
        shown = {k: np.asarray(v)[0].tolist() for k, v in self.params.items()}
        return f"{self.record.name}{shown}"


def _as_batch1(params: dict) -> dict:
    return {k: np.asarray([v]) for k, v in params.items()}


@st.composite
def steps(draw, names: tuple[str, ...], vocab: int) -> list[Step]:
    out = []
    for name in names:
        rec = RECORDS_BY_NAME[name]
        if rec.chain is not None and rec.chain.exact is not None:
            out.append(Step(rec, _as_batch1(draw(rec.chain.exact(vocab), label=name))))
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


def oracle_chain(row: np.ndarray, chain: list[Step], masked_handoff: bool = False,
                 fixed_shape: bool = True) -> TokenDataArray:
    """The truncating oracle chain; ``masked_handoff`` rebuilds the array from the dense masked
    row after every sampler, -inf entries included, as llama.cpp's CPU receives a backend row.

    The input's own -inf entries are dropped first: a masked row cannot say whether -inf was a
    candidate. ``fixed_shape`` (the reference for a masked chain) also drops the -inf entries an
    earlier step made (a -inf logit_bias) before every sampler whose result counts them
    (``masked_are_candidates=False``: xtc's size and min_keep, temp_ext's ln size), as the
    per-step bracket of ``impl_prefix`` judges each step; ``fixed_shape=False`` is llama.cpp's
    CPU chain as it runs, where a -inf bias leaves its entry in the array."""
    cur = TokenDataArray.from_logits(row.astype(np.float64))
    cur.keep(np.flatnonzero(np.isfinite(cur.logits)))
    for step in chain:
        if fixed_shape and not step.record.masked_are_candidates:
            cur.keep(np.flatnonzero(np.isfinite(cur.logits)))
        step.record.oracle({**step.scalar(), "n_vocab": row.size}).apply(cur)
        if masked_handoff:
            cur = TokenDataArray.from_logits(cur.dense_logits(row.size))
    return cur


@dataclass
class ChainRun:
    """The implementation's run of a chain, judged step by step."""
    masked: np.ndarray
    """[1, V] float32: the implementation's row after the steps it ran."""
    diverged: bool
    """Some filter kept other tokens than the oracle keeps on the same input (a legal choice
    inside the bracket): from there on the whole-chain oracle is no reference, each step is."""
    violation: str | None
    """Why a step is wrong, or None."""
    steps: int = 0
    """Steps judged (a violation stops the run at its step)."""



def _survivors_unchanged(out: np.ndarray, x64: np.ndarray, kept: np.ndarray) -> str | None:
    """A filter only removes tokens: the distribution over its survivors is the input's."""
    if not kept.any():
        return None
    why = compare(dense_distribution(out), dense_distribution(np.where(kept, x64, -np.inf)), diverged=False)
    return f"the survivors' distribution changed: {why}" if why else None


def impl_prefix(impl, row: np.ndarray, chain: list[Step], exact: bool = True) -> ChainRun:
    """Run ``chain`` in the impl, judging every step on the impl's own input (see the module
    docstring). ``exact``: transforms must be exact (fp32-exact chain inputs); otherwise within
    the record's ``transform_bound_u``."""
    state, diverged = row, False
    for i, step in enumerate(chain):
        out = np.asarray(step.record.impl(impl, state, step.params), dtype=np.float32)
        x64, params = state[0].astype(np.float64), step.scalar()
        if step.record.kind == "filter":
            kept = np.isfinite(out[0])
            must, may = step.record.must_may(x64, params, truncated=True)
            why = (describe_set_violation(kept, must, may) or count_violation(step.record, x64, params, kept, must, may)
                   or _survivors_unchanged(out[0], x64, kept))
            diverged |= not np.array_equal(kept, step.record.oracle_kept(x64, params, truncated=True))
        else:
            want = step.record.run_oracle(x64, params, truncated=True).dense_logits(row.shape[1])
            why = _transform_violation(step, out[0], x64, want, params, exact)
        if why:
            return ChainRun(out, diverged, f"step {i + 1} {step!r}: {why}", i + 1)
        state = out
    return ChainRun(state, diverged, None, len(chain))


def _transform_violation(step: Step, out: np.ndarray, x64: np.ndarray, want: np.ndarray, params: dict,
                         exact: bool) -> str | None:
    got = out.astype(np.float64)
    if exact:
        if np.array_equal(got, want):
            return None
        bad = int(np.flatnonzero(got != want)[0])
        return f"fp32-exact transform differs at id {bad}: {out[bad]} vs {want[bad]}"
    if not np.array_equal(np.isfinite(got), np.isfinite(want)):
        bad = int(np.flatnonzero(np.isfinite(got) != np.isfinite(want))[0])
        return f"masked tokens differ at id {bad}: {out[bad]} vs {want[bad]}"
    rep = elementwise_error(out, want, step.record.transform_bound_u(x64, params))
    return None if rep.ok else rep.describe()


def compare(d_got: np.ndarray, d_want: np.ndarray, diverged: bool) -> str | None:
    """None if the distributions agree (to float64 rounding, or - only after a step where the
    implementation legally kept other tokens - anywhere their supports differ), else how not."""
    if not np.array_equal(d_got > 0, d_want > 0):
        if diverged:
            return None
        diff = np.flatnonzero((d_got > 0) != (d_want > 0))
        return f"supports differ at ids {diff[:6].tolist()} though every step kept the oracle's tokens"
    err = np.abs(d_got - d_want).max()
    # two float64 softmaxes of the same n logits: each p within (γ_n + 2u)·p, whatever the sum order
    if err > 2 * (gamma(d_got.size, U64) + 2 * U64):
        return f"same support but probabilities differ by {err:.3g}"
    return None


def dense_distribution(masked_row: np.ndarray) -> np.ndarray:
    return TokenDataArray.from_logits(masked_row.astype(np.float64)).distribution()
