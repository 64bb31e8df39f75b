"""Per-case separation rate of the chain zoo's mutants under each chain-case draw.

``python -m properties.zoo.bench_chain_draws [N] [seed] [exec:HARNESS ...]`` draws N cases from the broad draw
(the old strategy), the interacting draw and ``chain_cases`` (the mix the tests use), and prints,
per mutant, the share of cases on which the judge rejects the mutant's row, and the correct
chain's rejections (false failures), with how often attribution named the mutant's own mistake.
With harness specs (e.g. the reference harnesses' founding-bug builds), their
``engines.llama_cpp_chain`` is measured instead of the zoo's mutants. The figures in
docs/judge.md#chains come from this script.
"""
from __future__ import annotations

import sys
import time

import gpu_impl
import gpu_impl.engines
from hypothesis import HealthCheck, Phase, given, seed as hseed, settings, strategies as st

from properties.engines.attribution import explaining
from properties.engines.chain_cases import (ChainCase, broad_chain_cases, chain_args, chain_cases,
                                             interacting_chain_cases)
from properties.engines.chains_whole import violation
from properties.zoo.samplers.chain_bugs import CHAIN_MUTANTS

def draw_cases(strategy: st.SearchStrategy[ChainCase], n: int, at: int) -> list[ChainCase]:
    got: list[ChainCase] = []

    @hseed(at)
    @settings(max_examples=n, database=None, deadline=None, phases=(Phase.generate,),
              suppress_health_check=list(HealthCheck))
    @given(cc=strategy)
    def collect(cc: ChainCase) -> None:
        got.append(cc)

    collect()
    return got


def main(n: int = 1000, at: int = 0, harnesses: tuple[str, ...] = ()) -> None:
    import numpy as np

    from properties.backends import load_impl
    from properties.engines.records import engines_impl

    correct = gpu_impl.engines.llama_cpp_chain
    if harnesses:
        # a founding-bug build named like a zoo mutant (harness-temp_misplaced) is expected to be
        # named as that mutant is
        says = {m.name: m.says for m in CHAIN_MUTANTS}
        subjects = [(spec, (lambda sub: lambda *a: sub("llama_cpp_chain", *a))(engines_impl(load_impl(spec, "numpy"))),
                     next((v for k, v in says.items() if spec.endswith(f"-{k}")), ())) for spec in harnesses]
    else:
        subjects = [(mt.name, mt.build(gpu_impl), mt.says) for mt in CHAIN_MUTANTS]
    for label, strategy in (("broad (old)", broad_chain_cases()), ("interacting", interacting_chain_cases()),
                            ("chain_cases (mix)", chain_cases())):
        t0 = time.time()
        ccs = draw_cases(strategy, n, at)
        false = sum(violation(np.asarray(correct(*chain_args(c)))[0], c.row.astype(np.float64), c.chain) is not None
                    for c in ccs)
        print(f"== {label}: {len(ccs)} cases, correct chain rejected on {false}")
        for name, fn, says in subjects:
            sep = named = 0
            for c in ccs:
                out = np.asarray(fn(*chain_args(c)))[0]
                row64 = c.row.astype(np.float64)
                if violation(out, row64, c.chain) is not None:
                    sep += 1
                    found = explaining(out, row64, c.chain)
                    named += any(f.startswith(s) for f in found for s in says)
            print(f"  {name:24s} separated {sep:5d}/{len(ccs)} = {100 * sep / max(1, len(ccs)):5.1f} %"
                  f"   attribution names it on {named}/{sep}")
        print(f"  ({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:3]), tuple(sys.argv[3:]))
