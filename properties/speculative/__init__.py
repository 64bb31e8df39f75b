"""Speculative decoding's verification step (``rejection_sample``): the standard rejection
sampler judged exactly on a stratified grid, and its invariants. ``PROPERTIES`` is the room's
table (name, draw, body, example cap): ``test_speculative.py`` and the zoo's speculative hunt
(``properties/zoo/test_speculative_mutants.py``) both run it, so a body is written once."""
from __future__ import annotations

from typing import Any, Callable

from hypothesis import strategies as st

from properties.property import Property
from properties.speculative import checks
from properties.speculative.strategies import EXACT_VOCABS, LARGE_VOCABS, corners, spec_cases
from properties.speculative.zero_draft import zero_draft_cases

USES = frozenset({"rejection_sample"})
"""The impl functions every body calls."""


def _spec_property(name: str, draw: Callable[[], st.SearchStrategy], body: Callable[[Any, Any], None],
                   max_examples: int | None = None, corners: Callable[[], tuple] | None = None) -> Property:
    """A speculative property, judged at one point; ``corners``: examples every run visits first."""
    return Property(name, lambda point, **scope: draw(), lambda impl, point, case: body(impl, case), USES,
                    max_examples=max_examples, corners=(lambda point: corners()) if corners else (lambda point: ()))


_SMALL = (2, 3, 4, 7, 64, 1023, 1024, 1025)
PROPERTIES = (
    _spec_property("first_token_exact", lambda: spec_cases(EXACT_VOCABS, max_k=1), checks.check_first_token_exact, 12, corners),
    _spec_property("matches_oracle", lambda: spec_cases(_SMALL + LARGE_VOCABS, max_k=3), checks.check_matches_oracle, 25),
    _spec_property("all_accepted", lambda: spec_cases(_SMALL + LARGE_VOCABS, max_k=3), checks.check_all_accepted, 15),
    _spec_property("all_rejected", lambda: spec_cases(_SMALL + LARGE_VOCABS, max_k=3), checks.check_all_rejected, 15),
    _spec_property("tie_at_cut", lambda: spec_cases(_SMALL + (8193,), max_k=2, families=("tie_cut", "tie_top_p")),
                 checks.check_tie_at_cut, 15, corners),
    _spec_property("zero_draft_accepted", lambda: zero_draft_cases(_SMALL), checks.check_zero_draft_accepted, 20),
)
