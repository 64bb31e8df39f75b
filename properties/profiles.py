"""Hypothesis profiles. ``ci`` is derandomized (same examples every run); ``nightly`` has 6.25x the
examples and draws the large vocabularies more often (3 choices in 10, ci 1 in 10; see
``large_vocab_weight`` for the shares measured). The hypothesis database, kept between nights,
replays every failure found before new examples are drawn. Nightly wall times measured on 2
cores are in docs/profiles.md."""
from __future__ import annotations

import os

from hypothesis import Phase, settings

# The per-example budget grows with vocab size (a 262,144 float64 sort per example), so
# example deadlines are off; hypothesis' own too_slow check stays on.
_common = dict(deadline=None, print_blob=True)

settings.register_profile("dev", max_examples=25, **_common)
settings.register_profile("ci", max_examples=40, derandomize=True, database=None, **_common)
settings.register_profile("nightly", max_examples=250, **_common)
# One example, no shrinking: for runs that ask only *whether* a test judges the implementation
# (properties/meta/test_meta_unjudged.py), not what it finds.
settings.register_profile("smoke", max_examples=1, derandomize=True, database=None,
                          phases=(Phase.explicit, Phase.generate), **_common)

# Witness searches (``hypothesis.find``): every phase but explain. find's success is a "failure" to
# hypothesis, whose explain phase then line-traces (sys.settrace) the whole search: measured 5x
# slower on the order matrix, for an explanation no witness table shows.
WITNESS_SEARCH_PHASES = (Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink)



def _draws_independent_of_loaded_modules() -> None:
    """Hold hypothesis' pool of *local constants* empty. Since 6.131 hypothesis mixes into its
    draws (5 % of integer, float, string and bytes choices) constants read from the source of every
    non-test module outside site-packages loaded at the time: which those are depends on the tests
    selected, their order, the xdist split, lazy imports and whether logitcheck is installed
    editable. Measured: the same ci seed drew different examples in a one-process and a two-worker
    run of the same two tests once a module was imported at plugin load, and a ``logitcheck
    rerun`` of one test loads fewer modules than the run that failed. Empty, the draws depend on
    the seed and the test only (``properties/meta/test_meta_determinism.py``). A private hook
    (``providers._get_local_constants``): where a later hypothesis lacks it, that test says so."""
    try:
        from hypothesis.internal.conjecture import providers
    except ImportError:  # pragma: no cover (a hypothesis without providers has no such pool)
        return
    if hasattr(providers, "_get_local_constants") and hasattr(providers, "Constants"):
        empty = providers.Constants()
        providers._get_local_constants = lambda: empty


_draws_independent_of_loaded_modules()

PROFILE = os.environ.get("LOGITCHECK_PROFILE", "dev")
settings.load_profile(PROFILE)


def current_profile() -> str:
    return settings._current_profile or PROFILE  # type: ignore[attr-defined]


def large_vocab_weight() -> float:
    """How often strategies draw a vocabulary of >= 32,000 tokens: 1 choice in 10 at ci, 3 in 10
    nightly, the minimal choice among them (``strategies.vocab_sizes``), so each property's
    first example is large. Measured: 500 draws give 10.6 % at ci and 33.4 % nightly; over the
    148 per-record ci properties (40 examples each) every one drew at least 2 large examples,
    mean 14.1 %, 10th-90th percentile 7.5-25 % (2 in 10: mean 21.6 %, and 17 % more CPU on
    impl-vs-oracle, engine variants, invariants and row contract: 80.6 s against 69.0 s on 2
    workers)."""
    return 0.3 if current_profile() == "nightly" else 0.1


def large_vocab_max_batch() -> int:
    """The largest batch drawn at >= 32,000 tokens. A batch's per-row paths (row offsets, a
    parameter taken from the wrong row, a kernel's per-row blocks) are the same at every vocab
    size and are drawn at batches of 1-9 on every small size, block edges included; a large row
    costs up to 9 oracle sorts of 262,144 tokens, so ci draws 1-2 rows there (still two rows
    sharing a multi-block kernel's scratch space) and the nightly 1-9. Measured: capping at 3
    rows took impl-vs-oracle and engine variants from 219 to 138 s (serial, ci)."""
    return 9 if current_profile() == "nightly" else 2
