"""``logitcheck report``: run the property suite in-process, keep results.json, render index.html.

The report is written even when properties fail: a failure is the most important thing the page
shows. Exit status is 0 once the page is written (``--strict``: 1 if any test failed or pytest
did not finish cleanly), 2 if no page could be written.
"""
from __future__ import annotations

import argparse
import datetime as dt
import importlib.util
import json
import os
import platform
import shlex
import sys
import time
from pathlib import Path
from typing import Any, Sequence

from reports import findings, models_cli, version
from reports.render import render
from reports.summary import tally

PROFILES = ("dev", "ci", "nightly")


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="logitcheck", description="Property-based verification of LLM inference numerics.")
    p.add_argument("--version", action="version", version=f"logitcheck {version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    r = sub.add_parser("report", help="run the property suite and write an HTML report",
                       description="Run the property suite (or read an earlier results.json) and write "
                                   "OUT/results.json and OUT/index.html.")
    r.add_argument("--profile", choices=PROFILES, default="ci",
                   help="hypothesis profile: dev (quick), ci (derandomized, the default), nightly (>= 10x examples)")
    r.add_argument("--seed", type=int, default=0, help="hypothesis seed (--hypothesis-seed); ignored by the "
                                                       "derandomized ci profile (default 0)")
    r.add_argument("--impl", default="gpu_impl", help="module implementing gpu_impl's API (default gpu_impl)")
    r.add_argument("--backend", choices=("numpy", "cupy"), default=None,
                   help="array backend for the implementation (default: the plugin's, numpy)")
    r.add_argument("--out", type=Path, default=Path("report"), help="output directory (default ./report)")
    r.add_argument("--from-results", type=Path, default=None, metavar="PATH",
                   help="do not run anything: render this existing results.json")
    r.add_argument("-k", dest="k", default=None, metavar="EXPR", help="pytest -k selection expression")
    r.add_argument("--strict", action="store_true", help="exit 1 if any test failed (for CI gates)")
    from reports.device_check import add_parser
    add_parser(sub)
    models_cli.add_subcommands(sub)
    findings.add_parser(sub)
    return p


def _versions() -> dict[str, str]:
    out = {"logitcheck": version(), "python": platform.python_version()}
    for mod in ("numpy", "scipy", "hypothesis", "pytest", "ml_dtypes", "cupy", "matplotlib", "llama_cpp"):
        try:
            out[mod] = str(__import__(mod).__version__)
        except Exception:  # absent, or a CUDA runtime that fails to load
            out[mod] = "absent"
    return out


def _run_suite(args: argparse.Namespace, results_path: Path) -> int:
    """pytest.main in this process; the plugin writes results_path. Returns pytest's exit code."""
    os.environ["LOGITCHECK_PROFILE"] = args.profile  # read by properties.profiles at import
    import pytest

    spec = importlib.util.find_spec("properties")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the 'properties' package is not importable: run from the logitcheck checkout "
                           "or pip install it")
    argv = [list(spec.submodule_search_locations)[0], "-p", "properties.plugin",
            "--lc-results", str(results_path), "--hypothesis-profile", args.profile,
            "--hypothesis-seed", str(args.seed), "-p", "no:cacheprovider", "-q", "--impl", args.impl]
    if args.backend:
        argv += ["--backend", args.backend]
    if args.k:
        argv += ["-k", args.k]
    print("logitcheck: pytest " + shlex.join(argv), flush=True)
    return int(pytest.main(argv))


def _derandomized(profile: str) -> bool | None:
    """Does this profile fix the examples (so --seed is moot)? None if the profiles cannot load."""
    try:
        from hypothesis import settings

        import properties.profiles  # noqa: F401  (registers the profiles)
        return bool(settings.get_profile(profile).derandomize)
    except Exception:
        return None


def run_and_record(args: argparse.Namespace, out: Path) -> tuple[Path, dict[str, Any]]:
    results_path = out / "results.json"
    results_path.unlink(missing_ok=True)  # never render a previous run's results by mistake
    started, t0 = dt.datetime.now(dt.timezone.utc), time.monotonic()
    error = None
    try:
        code = _run_suite(args, results_path)
    except Exception as exc:  # the page must still say what happened
        code, error = 3, f"the suite could not be run: {type(exc).__name__}: {exc}"
    if results_path.exists():
        results = json.loads(results_path.read_text())
    else:
        results = {"meta": {"impl": args.impl, "backend": args.backend or "numpy", "profile": args.profile},
                   "tests": [], "worst_error": [], "examples": [], "tables": {}}
        error = error or "pytest stopped before the logitcheck plugin wrote any results"
    meta = results.setdefault("meta", {})
    derandomized = _derandomized(args.profile)
    meta.update({"seed": args.seed, "seed_effective": None if derandomized is None else not derandomized,
                 "selection": args.k or "",
                 "date": started.isoformat(timespec="seconds"), "duration_s": round(time.monotonic() - t0, 1),
                 "pytest_exit": code, "versions": _versions()})
    if error:
        meta["error"] = error
    results_path.write_text(json.dumps(results, indent=1, default=str))
    return results_path, results


def report(args: argparse.Namespace) -> int:
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    if args.from_results is not None:
        results_path = args.from_results
        try:
            results = json.loads(results_path.read_text())
        except (OSError, ValueError) as exc:
            print(f"logitcheck: cannot read results from {results_path}: {exc}", file=sys.stderr)
            return 2
    else:
        results_path, results = run_and_record(args, out)
    try:
        page = render(results)
    except ValueError as exc:
        print(f"logitcheck: {results_path} is not a logitcheck results file: {exc}", file=sys.stderr)
        return 2
    html_path = out / "index.html"
    html_path.write_text(page, encoding="utf-8")

    meta = results.get("meta") or {}
    counts = tally(results.get("tests") or [])
    failed = counts.get("failed", 0)
    summary = ", ".join(f"{n} {'FAILED' if k == 'failed' else k}" for k, n in sorted(counts.items())) or "no tests ran"
    print(f"logitcheck: {summary} (impl {meta.get('impl', '?')}, backend {meta.get('backend', '?')}, "
          f"profile {meta.get('profile', '?')})")
    if failed:
        print(f"logitcheck: {failed} FAILED: the report lists each failure with its message")
    if meta.get("error"):
        print(f"logitcheck: {meta['error']}")
    print(f"  results: {results_path.resolve()}\n  report:  {html_path.resolve()}")
    clean = meta.get("pytest_exit", 0) in (0, None)
    return 1 if args.strict and (failed or not clean) else 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command == "report":
        return report(args)
    if args.command == "device-check":
        from reports.device_check import device_check
        return device_check(args)
    if args.command in models_cli.COMMANDS:
        return models_cli.run(args)
    if args.command == "findings":
        return findings.run(args)
    parser.print_help()
    return 2


if __name__ == "__main__":
    sys.exit(main())
