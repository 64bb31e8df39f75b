"""The closing figures of speculative sampling and logprobs, printed from the tests' own tables:

    python -m properties.speculative.figures [--peers]

runs (in this process, profile ci) the speculative room's tests, the speculative and logprob
mutant hunts and, with ``--peers``, the real logprob peers (llama.cpp's post-sampling
probabilities, transformers' ``compute_transition_scores``; skipped where they do not run), then
prints the tables those tests recorded: the exactness grid (the first token's q-weighted counts
against N·p, the allowance, the worst ratio), each mutant's kill (property, examples to kill;
the speculative ones with the corner cases and from drawn cases alone) and what the peers
returned. Nothing is measured here that a test does not judge.
"""
from __future__ import annotations

import sys

import pytest

TESTS = ("properties/speculative/test_speculative.py", "properties/zoo/test_speculative_mutants.py",
         "properties/zoo/test_logprobs_mutants.py")
PEERS = ("properties/peers/llama_cpp/test_logprobs_peer.py",
         "properties/peers/transformers/test_logprobs_transformers.py")
TABLES = ("speculative_exactness", "calibration_speculative", "calibration_speculative_drawn",
          "calibration_logprobs", "llama_cpp_post_sampling_logprobs", "transformers_logprobs")


def _print(name: str, table) -> None:
    print(f"\n== {name}")
    rows = table.items() if isinstance(table, dict) else enumerate(table)
    for key, row in rows:
        print(f"  {key}: {row}" if isinstance(table, dict) else f"  {row}")


def main(argv: list[str]) -> int:
    files = TESTS + (PEERS if "--peers" in argv else ())
    rc = pytest.main(["-q", "-p", "no:cacheprovider", "--hypothesis-profile=ci", *files])
    from properties import recording

    for name in TABLES:
        if name in recording.TABLES:
            _print(name, recording.TABLES[name])
    return int(rc)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
