"""``logitcheck judge`` and ``logitcheck signatures``: an engine author's path.

``judge --impl X`` runs exactly the tests that take the implementation (``--judged-only``),
optionally only some areas, prints a line per area as it finishes, and ends with "N tests judged
X: P passed, F failed, C NOT COVERED" per area, a verdict per function and the failures grouped
by cause (``properties/verdict.py``); X is a Python module with gpu_impl's API or ``exec:CMD``
(docs/protocol.md).
``--function NAME`` (repeatable) narrows the run to the tests that call those functions (read from
the tests' own parameters and ``calls`` markers: ``properties/calls.py``). ``signatures`` prints
every function of the judged API with its arguments, read from the code. ``rerun NODEID`` reruns
one test of the installed suite from any directory: the command each failure prints."""
from __future__ import annotations

import argparse
import importlib.util
import os
from pathlib import Path
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
    j.add_argument("--function", action="append", default=[], metavar="NAME",
                   help="only the tests that call this function (repeatable; names as `logitcheck signatures` "
                        "prints them: top_p, ops.rms_norm, quants.matvec)")
    j.add_argument("--all-not-covered", action="store_true",
                   help="list every NOT COVERED function, not only those of the areas the implementation answers")
    j.add_argument("-k", default=None, help="pytest -k expression, to narrow further")
    j.add_argument("--results", default=None, help="also write results.json here")
    j.set_defaults(handler=judge)
    s = sub.add_parser("signatures", help="every judged function with its arguments (from the code)")
    s.set_defaults(handler=signatures)
    r = sub.add_parser("rerun", help="rerun one test of the installed suite (the command a failure prints)",
                       description="Rerun one test by its node id as a failure prints it "
                                   "(properties/<room>/test_x.py::test[id]), from any directory; "
                                   "further arguments (--impl, --hypothesis-profile, ...) go to pytest.")
    r.add_argument("nodeid", help="properties/<room>/test_x.py::test_name[params]")
    r.add_argument("pytest_args", nargs=argparse.REMAINDER, help="options for pytest (--impl \"exec:...\", ...)")
    r.set_defaults(handler=rerun)


def package_dir() -> Path:
    """The installed ``properties`` package (the judge and its tests)."""
    spec = importlib.util.find_spec("properties")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the 'properties' package is not importable: pip install logitcheck")
    return Path(list(spec.submodule_search_locations)[0])


def room_of(area: str) -> str:
    """The folder of ``properties`` an area's tests live in (the whole chains are engines' tests)."""
    return "engines" if area == "chains" else area


# addopts cleared: a checkout's pyproject (found as the rootdir's inifile) must not change the run
BASE_ARGV = ("-o", "addopts=", "-p", "properties.plugin", "-p", "no:cacheprovider")


def judge_argv(args: argparse.Namespace) -> list[str]:
    home = package_dir()
    # only the rooms that hold tests taking the implementation are collected (the zoo, peers,
    # models and meta rooms import far more, and judge nothing of it: test_meta_judge_cli holds it)
    rooms = sorted({room_of(a) for a in (args.area or AREAS)})
    argv = [str(home / room) for room in rooms] + [*BASE_ARGV, "-q", "--rootdir", str(home.parent),
            "--judged-only", "--impl", args.impl, "--hypothesis-profile", args.profile,
            "--hypothesis-seed", str(args.seed), "--contract", args.contract, "-rN"]
    for area in args.area:
        argv += ["--area", area]
    for name in args.function:
        argv += ["--function", name]
    if args.all_not_covered:
        argv.append("--all-not-covered")
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

    from properties.api import area_of
    from reports.progress import Progress

    return int(pytest.main(judge_argv(args), plugins=[Progress(areas=area_of)]))


def rerun_argv(nodeid: str, pytest_args: list[str]) -> list[str]:
    """pytest's arguments for one test named relative to the folder holding the installed package
    (``properties/...``); a node id that names an existing path is taken as it is."""
    path, sep, rest = nodeid.partition("::")
    home = package_dir()
    if not Path(path).exists() and Path(path).parts[:1] == ("properties",):
        path = str(home.parent / path)
    return [path + sep + rest, *BASE_ARGV, "--rootdir", str(home.parent), *pytest_args]


def rerun(args: argparse.Namespace) -> int:
    import pytest

    return int(pytest.main(rerun_argv(args.nodeid, list(args.pytest_args))))


def signatures(args: argparse.Namespace) -> int:
    from properties.api import signature_table

    for row in signature_table():
        print(row.line())
    return 0


