"""``logitcheck judge`` and ``logitcheck signatures``: an engine author's path.

``judge --impl X`` runs exactly the tests that take the implementation (``--judged-only``),
optionally only some areas, and ends with "N tests judged X: P passed, F failed, C NOT COVERED"
per area; X is a Python module with gpu_impl's API or ``exec:CMD`` (docs/protocol.md).
``signatures`` prints every function of the judged API with its arguments, read from the code."""
from __future__ import annotations

import argparse
import importlib.util
import os

from typing import Any

AREAS = ("samplers", "ops", "quants", "chains", "engines", "speculative")


def add_parser(sub: Any) -> None:
    j = sub.add_parser("judge", help="run the tests that judge an implementation (module or exec:CMD)",
                       description=__doc__.split("\n\n")[0])
    j.add_argument("--impl", required=True, help="a module with gpu_impl's API, or exec:CMD for a harness")
    j.add_argument("--area", action="append", choices=AREAS, default=[],
                   help="only this area (repeatable; default: every area that takes the implementation)")
    j.add_argument("--profile", default="ci", help="hypothesis profile (dev, ci, nightly; default ci)")
    j.add_argument("--seed", type=int, default=0)
    j.add_argument("--contract", choices=("default", "strict", "batch_invariant"), default="default",
                   help="default: every correct engine; strict: tree-order sums, expf accuracy, refusals; "
                        "batch_invariant: default plus bitwise-equal rows whatever the batch")
    j.add_argument("-n", "--workers", default=None, help="pytest-xdist workers (default: one per core if installed)")
    j.add_argument("-k", default=None, help="pytest -k expression, to narrow further")
    j.add_argument("--results", default=None, help="also write results.json here")
    j.set_defaults(handler=judge)
    s = sub.add_parser("signatures", help="every judged function with its arguments (from the code)")
    s.set_defaults(handler=signatures)


def judge_argv(args: argparse.Namespace) -> list[str]:
    spec = importlib.util.find_spec("properties")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the 'properties' package is not importable: pip install logitcheck")
    # addopts cleared: a checkout's pyproject (found as the rootdir's inifile) must not change the run
    argv = [list(spec.submodule_search_locations)[0], "-o", "addopts=", "-p", "properties.plugin",
            "-p", "no:cacheprovider", "-q",
            "--judged-only", "--impl", args.impl, "--hypothesis-profile", args.profile,
            "--hypothesis-seed", str(args.seed), "--contract", args.contract, "-rN"]
    for area in args.area:
        argv += ["--area", area]
    if args.k:
        argv += ["-k", args.k]
    if args.results:
        argv += ["--lc-results", args.results]
    workers = args.workers
    if workers is None and importlib.util.find_spec("xdist") is not None and (os.cpu_count() or 1) > 1:
        workers = "auto"
    if workers not in (None, "0"):
        argv += ["-n", str(workers)]
    return argv


def judge(args: argparse.Namespace) -> int:
    import pytest

    return int(pytest.main(judge_argv(args)))


def signatures(args: argparse.Namespace) -> int:
    from properties.api import signature_table

    for row in signature_table():
        print(row.line())
    return 0


