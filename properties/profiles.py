"""Hypothesis profiles. ``ci`` is derandomized (same examples every run); ``nightly`` has 10x the
examples and draws the large vocabularies twice as often (20 % of draws, ci 10 %: 20x ci's
large-vocabulary examples per property). At 35 % the nightly took > 80 min on 2 cores; nearly all of
it in examples of 32,000-262,144 tokens, whose cost is linear in their share."""
from __future__ import annotations

import os

from hypothesis import settings

# The per-example budget grows with vocab size (a 262,144 float64 sort per example), so
# example deadlines are off; hypothesis' own too_slow check stays on.
_common = dict(deadline=None, print_blob=True)

settings.register_profile("dev", max_examples=25, **_common)
settings.register_profile("ci", max_examples=40, derandomize=True, database=None, **_common)
settings.register_profile("nightly", max_examples=400, **_common)

PROFILE = os.environ.get("LOGITCHECK_PROFILE", "dev")
settings.load_profile(PROFILE)


def current_profile() -> str:
    return settings._current_profile or PROFILE  # type: ignore[attr-defined]


def large_vocab_weight() -> float:
    """How often strategies draw a vocabulary of >= 32,000 tokens."""
    return 0.2 if current_profile() == "nightly" else 0.1
