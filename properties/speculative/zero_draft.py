"""Drafts the draft model gave probability 0 while the target did not.

The acceptance test accepts draft d when a·q(d) < p(d) (α = min(1, p/q)); at q(d) = 0 and
p(d) > 0 the ratio is +inf, so d is accepted for every uniform a, even a → 1. An engine that
computes p/q as 0/0-guarded 0, or NaN, rejects it and emits a residual token instead (the
residual (p - q)⁺ then holds d too, so only the accept decision shows the bug). p is the target
after its own top-k and top-p; a token those filters drop is not a case here (p = 0).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
from hypothesis import strategies as st

from properties.speculative.strategies import SpecCase, spec_cases

ACCEPT_U = (0.0, 0.25, 0.5, 0.75, 0.999, 1 - 2**-24)
"""Acceptance uniforms: every one must accept a draft of q = 0 < p."""


@st.composite
def zero_draft_cases(draw, vocabs: tuple[int, ...]) -> tuple[SpecCase, int]:
    """A spec case whose first draft row gives one token of the target's support probability 0
    (q renormalised in float32; a one-token q keeps its mass elsewhere), and that token."""
    case = draw(spec_cases(vocabs, max_k=2))
    p0 = case.p[0]
    support = np.flatnonzero(p0 > 0)
    j = int(draw(st.sampled_from(support.tolist()), label="draft with q = 0"))
    q = case.q.astype(np.float64).copy()
    q[0, j] = 0.0
    if q[0].sum() == 0:
        q[0, (j + 1) % case.vocab] = 1.0
    q = (q / q.sum(axis=1, keepdims=True)).astype(np.float32)
    return replace(case, q=q), j
