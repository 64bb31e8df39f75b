"""The engine room's properties as one table (``Property``): the generic sampler properties at
each engine record (impl ≡ oracle, the exact-mass boundary, no-op, monotone, min_keep, float32),
the chains judged whole, per-request seeds (batch independence, the law over seeds, a stream that
advances) and ``rejection_sample``'s properties. The zoo's engine-variant hunt
(``properties/zoo/test_engine_variant_mutants.py``) runs it; the room's tests run the same bodies."""
from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import strategies as st

from properties.engines import seeds
from properties.engines.engine_chains import CHAINS, chain_cases, chain_corners, check_chain
from properties.engines.records import ENGINE_RECORDS, engines_impl
from properties.property import Property
from properties.samplers.checks import judge_softmax
from properties.samplers.strategies import Case, cases
from properties.samplers.suite import EXACT_BOUNDARY, IMPL_VS_ORACLE, MIN_KEEP, MONOTONE, NOOP
from properties.speculative import PROPERTIES as SPECULATIVE

NEW_SPECULATIVE = frozenset({"zero_draft_accepted"})


def _chain_property(chain: Any) -> Property:
    return Property(f"chain survivors/{chain.name}", lambda point, **kw: chain_cases(chain),
                    lambda impl, point, case: check_chain(impl, chain, case), frozenset({chain.impl_name}),
                    max_examples=40, corners=lambda point: chain_corners(chain))


def _seed_property(name: str, draw: st.SearchStrategy, body: Any, max_examples: int | None = None) -> Property:
    return Property(name, lambda point, **kw: draw, lambda impl, point, e: body(engines_impl(impl), e),
                    frozenset({seeds.FN}), max_examples=max_examples)


def _batch_independence(sub: Any, case: seeds.SeedCase) -> None:
    from properties.failure import Failure

    why = seeds.violation(sub, case)
    if why is not None:
        raise Failure(why, property="per-request seeds", record=seeds.FN, case=case)


SOFTMAX_CASES = cases(dtypes=("float32", "float16", "bfloat16"), max_vocab=4096)


def check_engine_softmax(impl: Any, case: Case) -> None:
    """``engines.softmax`` within the numerics model of a float32 softmax
    (``measure.check_softmax`` under the active contract), exactly 0 at -inf."""
    from properties.failure import Failure

    p = np.asarray(engines_impl(impl)("softmax", case.logits))
    for b in range(case.batch):
        rep, why = judge_softmax(p[b], case.row64(b))
        if why:
            raise Failure(why, property="engines softmax", record="engines.softmax", case=case, row=b, report=rep)


def properties() -> list[Property]:
    """Every engine property: the per-record ones, seeds, speculative; then those added with
    coverage by argument (exact boundaries, chains whole, the law over seeds, streams, q = 0 drafts)."""
    out = []
    for r in ENGINE_RECORDS:
        points = [IMPL_VS_ORACLE] + [p for p in (NOOP, MONOTONE, MIN_KEEP) if p.applies(r)]
        out += [p.at((r, "float32"), name=f"{p.name}/{r.name}") for p in points]
    out.append(_seed_property("per-request seeds", seeds.seed_cases(), _batch_independence))
    out += [p for p in SPECULATIVE if p.name not in NEW_SPECULATIVE]
    # new with coverage by argument
    out += [EXACT_BOUNDARY.at((r, "float32"), name=f"{EXACT_BOUNDARY.name}/{r.name}")
            for r in ENGINE_RECORDS if r.kind == "filter" and r.boundary is not None]
    out += [_chain_property(c) for c in CHAINS]
    out.append(Property("engines softmax", lambda point, **kw: SOFTMAX_CASES,
                        lambda impl, point, case: check_engine_softmax(impl, case), frozenset({"softmax"})))
    out += [_seed_property(f"law over seeds/{r[0]}", st.just(r), seeds.check_law_over_seeds, 1) for r in seeds.LAW_ROWS]
    out.append(_seed_property("stream advances", st.just(None), seeds.check_stream_advances, 1))
    out += [p for p in SPECULATIVE if p.name in NEW_SPECULATIVE]
    return out

