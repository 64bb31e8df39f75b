"""The sampler properties as one table: which records each applies to, how to draw one example,
and the body (a ``checks`` function). The pytest tests (test_impl_vs_oracle, test_invariants,
test_boundary_conventions, test_row_contract; engines/test_variants on the engine records) and
the bug zoo (properties/zoo/samplers.py) are all generated from it, so a body is written once.

Record-free properties (softmax invariants, the distribution gate) take ``record=None``.
"""
from __future__ import annotations

from typing import Any, Callable

import pytest
from hypothesis import strategies as st

from properties import recording
from properties.backends import Impl
from properties.plugin import covered
from properties.samplers import checks
from properties.samplers.boundaries import BOUNDARY, exact_boundary_cases
from properties.samplers.corners import corners
from properties.samplers.record import SamplerRecord
from properties.samplers.strategies import cases, record_cases
from properties.property import Property

Draw = Callable[..., st.SearchStrategy]
"""(record, dtype, min_vocab=, max_vocab=) -> a strategy of one example."""
Point = tuple  # (record or None, dtype): where a sampler property is judged

ALL_DTYPES = ("float32", "float16", "bfloat16")
GOF_MAX_VOCAB = 500  # as test_distribution's CI rows: N x V within the CI budget
GOF_EXAMPLES = 10  # the zoo's cap: one example is checks.DRAWN_GRID_N dist draws
ONE_CDF_EXAMPLES = 8  # one example is ~250 dist draws on a row of 32,000 to 262,144 tokens


def _record_uses(calls_softmax: bool = False, subject: str = "") -> Callable[[Point], frozenset[str]]:
    """The impl functions a sampler property's body calls at (record, dtype): the record's (and
    softmax, for a filter's renormalised probabilities, where the body judges those too), or
    ``subject``'s for a record-free property."""
    def uses(point: Point) -> frozenset[str]:
        record = point[0] if point else None
        if record is None:
            return frozenset({subject})
        own = record.kind != "filter" or checks.KEPT_AS_GIVEN in record.tags
        return frozenset({record.impl_name} | ({"softmax"} if calls_softmax and not own else set()))
    return uses


def _impl_only(record: SamplerRecord) -> bool:
    return record.has_impl


def sampler_property(name: str, draw: Draw, body: Callable[[Impl, SamplerRecord | None, Any], Any], *,
                     applies: Callable[[SamplerRecord], bool] = _impl_only, calls_softmax: bool = False,
                     subject: str = "", max_examples: int | None = None,
                     corners: Callable[[SamplerRecord | None, str], tuple] | None = None) -> Property:
    """A sampler property at points (record, dtype): ``draw(record, dtype, **scope)`` and
    ``body(impl, record, example)`` as the checks are written."""
    return Property(name, lambda point, **kw: draw(*point, **kw), lambda impl, point, e: body(impl, point[0], e),
                    _record_uses(calls_softmax, subject), applies=applies, max_examples=max_examples,
                    corners=(lambda point: corners(*point)) if corners else (lambda point: ()), subject=subject)


def _with(strategy: st.SearchStrategy, extra: Callable[[Any], st.SearchStrategy]) -> st.SearchStrategy:
    """(example, something drawn for that example)."""
    return strategy.flatmap(lambda c: st.tuples(st.just(c), extra(c)))


def _monotone_draw(r: SamplerRecord, d: str, **kw) -> st.SearchStrategy:
    param = r.monotone[0][0]
    return _with(record_cases(r, d, **kw), lambda c: r.params(c.batch, c.vocab).map(lambda p: p[param]))


def _bad_row_draw(r: SamplerRecord, d: str, **kw) -> st.SearchStrategy:
    return _with(record_cases(r, d, **kw), lambda c: st.tuples(
        st.integers(0, c.batch - 1), st.integers(0, c.vocab - 1), st.sampled_from(checks.BAD_ROWS)))


def _gate_draw(r: None, d: str, min_vocab: int = 1, max_vocab: int = GOF_MAX_VOCAB) -> st.SearchStrategy:
    """Vocabularies up to GOF_MAX_VOCAB, or just above ``min_vocab`` where a bug needs more."""
    return cases(dtypes=ALL_DTYPES, min_vocab=min(min_vocab, GOF_MAX_VOCAB),
                 max_vocab=max(min(max_vocab, GOF_MAX_VOCAB), min_vocab))


def _large_draw(r: None, d: str, min_vocab: int = 1, max_vocab: int = 262144) -> st.SearchStrategy:
    """One row of a large vocabulary (32,000 / 151,936 / 262,144): where a float32 running sum
    drifts past the scan's bound. ``max_vocab`` below the large sizes still draws the smallest."""
    from properties.samplers.strategies import LARGE_VOCABS
    top = max(LARGE_VOCABS[0], max_vocab)
    return cases(dtypes=ALL_DTYPES, min_vocab=max(min_vocab, LARGE_VOCABS[0]), max_vocab=top, max_batch=1)


IMPL_VS_ORACLE = sampler_property(
    "impl_vs_oracle", lambda r, d, **kw: record_cases(r, d, **kw), checks.check_matches_oracle,
    calls_softmax=True, corners=corners)
EXACT_BOUNDARY = sampler_property(
    "exact_boundary", lambda r, d, max_vocab=4096, **kw: exact_boundary_cases(r, d, max_vocab=max_vocab),
    checks.check_matches_oracle, applies=lambda r: r.name in BOUNDARY, calls_softmax=True)
NOOP = sampler_property(
    "noop", lambda r, d, **kw: st.tuples(cases(dtypes=(d,), **kw), st.sampled_from(r.noop)),
    lambda impl, r, e: checks.check_noop(impl, r, *e), applies=lambda r: bool(r.noop))
MONOTONE = sampler_property(
    "monotone", _monotone_draw, lambda impl, r, e: checks.check_monotone(impl, r, *e),
    applies=lambda r: r.kind == "filter" and bool(r.monotone))
MIN_KEEP = sampler_property(
    "min_keep", lambda r, d, **kw: record_cases(r, d, **kw), checks.check_min_keep,
    applies=lambda r: r.kind == "filter")
BATCH_INVARIANCE = sampler_property(
    "batch_invariance", lambda r, d, **kw: record_cases(r, d, **kw), checks.check_batch_invariance)
BAD_ROW = sampler_property(
    "bad_row", _bad_row_draw, lambda impl, r, e: checks.check_rejects_bad_row(impl, r, e[0], *e[1]))
SOFTMAX_INVARIANTS = sampler_property(
    "invariants", lambda r, d, **kw: st.tuples(cases(dtypes=ALL_DTYPES, **kw), st.integers(-256, 256)),
    lambda impl, r, e: checks.check_softmax_invariants(impl, *e), subject="softmax")
DISTRIBUTION_GATE = sampler_property(
    "dist_grid", _gate_draw, lambda impl, r, c: checks.check_dist_grid(impl, c),
    subject="dist", max_examples=GOF_EXAMPLES)

DIST_ONE_CDF = sampler_property(
    "dist_one_cdf", _large_draw, lambda impl, r, c: checks.check_dist_one_cdf(impl, c),
    subject="dist", max_examples=ONE_CDF_EXAMPLES)

PER_RECORD = (IMPL_VS_ORACLE, EXACT_BOUNDARY, NOOP, MONOTONE, MIN_KEEP)
"""Per-record judgements, in the zoo's order (the float32 impl≡oracle, then the same body on
exact masses, then the other dtypes, are ordered by the zoo; see properties/zoo/samplers.py)."""
ROW_CONTRACT = (BATCH_INVARIANCE, BAD_ROW)
RECORD_FREE = (SOFTMAX_INVARIANTS, DISTRIBUTION_GATE, DIST_ONE_CDF)


def params_for(records: list[SamplerRecord], dtypes: bool = True, prop: Property | None = None) -> list:
    """pytest parameters (record, dtype) with readable ids: every dtype of each record (or float32
    only), for the records ``prop`` applies to (all if None)."""
    return [pytest.param(r, d, id=f"{r.name}-{d}") for r in records if prop is None or prop.applies(r)
            for d in (r.dtypes if dtypes else ("float32",))]


_EXAMPLES: dict[tuple[int, int, str], tuple[Property, SamplerRecord | None, st.SearchStrategy]] = {}


def _examples(prop: Property, record: SamplerRecord | None, dtype: str) -> st.SearchStrategy:
    """One strategy object per (property, record, dtype): hypothesis validates every new object
    (recursive emptiness checks), measured ~5 ms per example when one was built at every draw.
    Keyed by identity (records hold dicts); the entry holds both, so no id is reused."""
    key = (id(prop), id(record), dtype)
    if key not in _EXAMPLES:
        _EXAMPLES[key] = (prop, record, prop.draw((record, dtype)))
    return _EXAMPLES[key][2]


def run(impl: Impl, prop: Property, record: SamplerRecord | None, dtype: str, data: st.DataObject) -> None:
    """Draw one example, run the body, record the worst error it measured with its example."""
    example = data.draw(_examples(prop, record, dtype), label=prop.name)
    with covered():
        reports = prop.body(impl, (record, dtype), example) or []
    case = example[0] if isinstance(example, tuple) else example
    recording.note(record.name if record else prop.subject, prop.name, case.dtype,
                   max(reports, key=lambda r: r.ratio, default=None), example)
