"""Property 5: GPU prefix, CPU suffix. Running the first m samplers in the implementation and
the rest in the oracle equals the all-oracle chain, for every split m, for llama.cpp's default
chain and for generated chains. The hand-off is a truncated array built from the masked row
(-inf entries dropped), in vocab order. Every step of the prefix is judged on the
implementation's own survivors (properties/samplers/chains.py), so a legal choice at one
boundary never stops the judging of the steps after it; where the prefix kept exactly the
oracle's tokens, the split's distribution must equal the whole chain's.

The same seed does not give the same token across splits, and that is recorded, not failed: the
hand-off array is in vocab order while a CPU top_k / top_p leaves it sorted, and dist inverts
the CDF in the array's current order (llama.cpp's backend top_k is unordered too).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

from oracle.samplers.selection import select_inverse_cdf
from properties import recording
from properties.samplers.chains import CHAIN_SAMPLERS, DEFAULT_CHAIN, chain_cases, compare, impl_prefix, oracle_chain
from properties.plugin import covered

_TOKENS = {"same": 0, "different": 0}


@pytest.mark.calls(*CHAIN_SAMPLERS)  # a random chain draws from these (properties/calls.py)
@pytest.mark.parametrize("names", [DEFAULT_CHAIN, None], ids=["default-chain", "random-chain"])
@given(data=st.data())
def test_gpu_prefix_cpu_suffix(impl, names, data):
    row, chain = data.draw(chain_cases(names), label="chain_case")
    u = data.draw(st.floats(0, 1, exclude_max=True), label="u")
    whole = oracle_chain(row[0], chain)
    if not np.isfinite(whole.logits).any():
        return  # nothing to sample: the bad-input properties own that case
    want = whole.distribution(row.shape[1])
    for m in range(len(chain) + 1):
        with covered():
            run = impl_prefix(impl, row, chain[:m])
        assert run.violation is None, f"split {m}: {run.violation}"
        got_cur = oracle_chain(run.masked[0], chain[m:])
        if not np.isfinite(got_cur.logits).any():
            assert run.diverged, f"split {m} of {chain}: no token survives, the oracle keeps some"
            continue
        why = compare(got_cur.distribution(row.shape[1]), want, run.diverged)
        assert why is None, f"split {m} of {chain}: {why}"
        same = got_cur.ids[select_inverse_cdf(got_cur.logits, u)] == whole.ids[select_inverse_cdf(whole.logits, u)]
        _TOKENS["same" if same else "different"] += 1
    recording.table("split_same_seed_tokens", dict(_TOKENS))
    recording.note("chain" if names is None else "default_chain", "gpu_prefix_cpu_suffix", "float32")
