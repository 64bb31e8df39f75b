"""Property 2: truncation ≡ masking. The impl's masked chain and the oracle's truncating chain
describe the same distribution (for single filters and whole chains); and the oracle itself
gives the same result whether a chain hands on a truncated array or a masked dense row - except
for the llama.cpp samplers that count -inf entries, shown by recorded witnesses."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import find, given, settings, strategies as st

from properties import recording
from properties.samplers.chains import (CHAIN_SAMPLERS, chain_cases, compare, dense_distribution, impl_prefix,
                               oracle_chain)
from properties.plugin import covered


@pytest.mark.parametrize("names", [None] + [(n,) for n in CHAIN_SAMPLERS], ids=lambda n: "random-chain" if n is None else n[0])
@given(data=st.data())
def test_masked_impl_chain_equals_truncated_oracle(impl, names, data):
    row, chain = data.draw(chain_cases(names), label="chain_case")
    with covered():
        masked, ambiguous, violation = impl_prefix(impl, row, chain)
    assert violation is None, violation
    want = oracle_chain(row[0], chain)
    if not np.isfinite(want.logits).any():  # e.g. a -inf bias on the only finite token
        assert not np.isfinite(masked).any(), f"chain {chain}: the oracle keeps no token, the impl does"
    else:
        why = compare(dense_distribution(masked[0]), want.distribution(row.shape[1]), ambiguous)
        assert why is None, f"chain {chain}: {why}"
    recording.note("chain" if names is None else names[0], "truncation≡masking", "float32")


# llama.cpp samplers whose result depends on how many -inf entries the array holds
HANDOFF_DIVERGENT = {"xtc": "min_keep and the size >= 2 test count -inf entries, so a masked row can be cut "
                            "where the truncated array is not (and the RNG is consumed where it was not)"}


@pytest.mark.parametrize("name", [n for n in CHAIN_SAMPLERS if n not in HANDOFF_DIVERGENT])
@given(data=st.data())
def test_oracle_masked_handoff_is_equivalent(name, data):
    """Any filter first, then ``name``: a truncated hand-off and a masked one agree exactly."""
    first = data.draw(st.sampled_from([n for n in CHAIN_SAMPLERS if n != "temp"]), label="first")
    row, chain = data.draw(chain_cases((first, name)), label="chain_case")
    a, b = (oracle_chain(row[0], chain, masked_handoff=h) for h in (False, True))
    if not np.isfinite(a.logits).any() or not np.isfinite(b.logits).any():
        assert not np.isfinite(a.logits).any() and not np.isfinite(b.logits).any(), f"{chain}: one keeps no token"
        return
    a, b = a.distribution(row.shape[1]), b.distribution(row.shape[1])
    assert np.array_equal(a > 0, b > 0) and np.abs(a - b).max() <= 1e-12, f"{chain}: hand-off changes the result"


@pytest.mark.parametrize("name", sorted(HANDOFF_DIVERGENT))
def test_oracle_masked_handoff_divergence_witness(name):
    def differs(case) -> bool:
        row, chain = case
        a, b = (oracle_chain(row[0], chain, masked_handoff=h).dense_logits(row.shape[1]) for h in (False, True))
        return not np.array_equal(np.isfinite(a), np.isfinite(b))

    row, chain = find(chain_cases(("top_k", name), max_vocab=64), differs,
                      settings=settings(max_examples=3000, derandomize=True, database=None, deadline=None))
    witness = {"sampler": name, "why": HANDOFF_DIVERGENT[name], "logits": row[0].tolist(), "chain": repr(chain)}
    recording.table(f"handoff_divergence_{name}", witness)
