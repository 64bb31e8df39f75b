"""``logitcheck``: the console script. Each subcommand is a function that adds its parser and
names its handler; a new one is a function appended to ``SUBCOMMANDS``::

    def forward_command(sub) -> None:
        p = sub.add_parser("forward", help="...")
        p.add_argument(...)
        p.set_defaults(handler=run_forward)     # run_forward(args) -> exit status

``logitcheck report`` runs the property suite in this process (the pytest plugin writes
results.json) and renders OUT/index.html. The page is written even when properties fail: a
failure is the most important thing it shows. Exit status: 0 once the page is written
(``--strict``: 1 if any test failed or pytest did not finish cleanly), 2 if no page could be written.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import shlex
import sys
from pathlib import Path
from typing import Any, Callable, Sequence

from reports import device_check, findings, judge_cli, models_cli, version
from reports.baseline import DEFAULT_FACTOR, Changes, compare
from reports.progress import Progress, baseline_durations
from reports.render import render
from reports.summary import tally

PROFILES = ("dev", "ci", "nightly")
Handler = Callable[[argparse.Namespace], int]


def report_command(sub: Any) -> None:
    r = sub.add_parser("report", help="run the property suite and write an HTML report",
                       description="Run the property suite (or read an earlier results.json) and write "
                                   "OUT/results.json and OUT/index.html.")
    r.add_argument("--profile", choices=PROFILES, default="ci",
                   help="hypothesis profile: dev (quick), ci (derandomized, the default), nightly (>= 10x examples)")
    r.add_argument("--seed", type=int, default=0, help="hypothesis seed (--hypothesis-seed); ignored by the "
                                                       "derandomized ci profile (default 0)")
    r.add_argument("--impl", default="gpu_impl", help="module implementing gpu_impl's API (default gpu_impl)")
    from properties.api import backends
    r.add_argument("--backend", choices=backends(), default=None,
                   help="array backend for the implementation (default: the plugin's, numpy)")
    r.add_argument("--out", type=Path, default=Path("report"), help="output directory (default ./report)")
    r.add_argument("--from-results", type=Path, default=None, metavar="PATH",
                   help="do not run anything: render this existing results.json")
    r.add_argument("--baseline", type=Path, default=None, metavar="OLD/results.json",
                   help="show what changed since this earlier run at the top of the page")
    r.add_argument("--regression-factor", type=float, default=DEFAULT_FACTOR, metavar="F",
                   help=f"list an error as regressed or improved when its error / bound moved by more than "
                        f"this factor (default {DEFAULT_FACTOR:g})")
    r.add_argument("-n", "--workers", default=None, metavar="N|auto",
                   help="pytest-xdist worker processes (the results are the same as one process's); default: "
                        "auto (one per core) when pytest-xdist is installed and there is more than one core; 0: none")
    r.add_argument("-k", dest="k", default=None, metavar="EXPR", help="pytest -k selection expression")
    r.add_argument("--strict", action="store_true", help="exit 1 if any test failed (for CI gates)")
    r.set_defaults(handler=report)


def screenshot_command(sub: Any) -> None:
    s = sub.add_parser("screenshot", help="open a report in headless Chromium: screenshot and render check",
                       description="Load PAGE in headless Chromium, save a PNG of its first screen and print "
                                   "what rendered (tables, plots, console errors).")
    s.add_argument("page", type=Path, help="the report's index.html")
    s.add_argument("--png", type=Path, default=None, help="where to save the screenshot (default PAGE.png)")
    s.add_argument("--width", type=int, default=1280)
    s.add_argument("--height", type=int, default=900)
    s.set_defaults(handler=screenshot)


SUBCOMMANDS: list[Callable[[Any], None]] = [report_command, screenshot_command, models_cli.add_subcommands,
                                           findings.add_parser, device_check.add_parser, judge_cli.add_parser]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="logitcheck", description="Property-based verification of LLM inference numerics.")
    p.add_argument("--version", action="version", version=f"logitcheck {version()}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND")
    for add in SUBCOMMANDS:
        add(sub)
    return p


def pytest_argv(args: argparse.Namespace, results_path: Path) -> list[str]:
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
    has_xdist = importlib.util.find_spec("xdist") is not None
    workers = args.workers if args.workers is not None else ("auto" if has_xdist and (os.cpu_count() or 1) > 1
                                                             else "0")
    if workers not in ("0", "1"):
        if not has_xdist:
            raise RuntimeError("--workers needs pytest-xdist (pip install pytest-xdist)")
        argv += ["-n", str(workers)]
    return argv


def run_and_record(args: argparse.Namespace, out: Path, baseline: dict[str, Any] | None = None
                   ) -> tuple[Path, dict[str, Any]]:
    """Run the suite in this process; the plugin writes results.json (schema in reports/schema.py)."""
    results_path = out / "results.json"
    results_path.unlink(missing_ok=True)  # never render a previous run's results by mistake
    error = None
    try:
        os.environ["LOGITCHECK_PROFILE"] = args.profile  # read by properties.profiles at import
        import pytest

        argv = pytest_argv(args, results_path)
        print("logitcheck: pytest " + shlex.join(argv), flush=True)
        from properties.api import area_of

        code = int(pytest.main(argv, plugins=[Progress(durations=baseline_durations(baseline), areas=area_of)]))
    except Exception as exc:  # the page must still say what happened
        code, error = 3, f"the suite could not be run: {type(exc).__name__}: {exc}"
    if results_path.exists():
        results = json.loads(results_path.read_text())
    else:
        results = {"schema_version": 2, "meta": {"impl": args.impl, "backend": args.backend or "numpy",
                                                 "profile": args.profile, "pytest_exit": code},
                   "tests": [], "worst_error": [], "examples": [], "tables": {}}
        error = error or "pytest stopped before the logitcheck plugin wrote any results"
    if error:
        results["meta"]["error"] = error
        results_path.write_text(json.dumps(results, indent=1, default=str))
    return results_path, results


def _load(path: Path) -> dict[str, Any] | str:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        return f"cannot read results from {path}: {exc}"
    return data if isinstance(data, dict) else f"{path} is not a logitcheck results file (not a JSON object)"


def report(args: argparse.Namespace) -> int:
    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    changes: Changes | None = None
    old: dict[str, Any] | str | None = None
    if args.baseline is not None:  # read first: a missing baseline should not cost a 5-minute run
        old = _load(args.baseline)
        if isinstance(old, str):
            print(f"logitcheck: baseline: {old}", file=sys.stderr)
            return 2
    if args.from_results is not None:
        results = _load(args.from_results)
        if isinstance(results, str):
            print(f"logitcheck: {results}", file=sys.stderr)
            return 2
        results_path = args.from_results
    else:
        results_path, results = run_and_record(args, out, old)
    if args.baseline is not None:
        changes = compare(old, results, args.regression_factor)
    html_path = out / "index.html"
    html_path.write_text(render(results, changes), encoding="utf-8")

    meta = results.get("meta") or {}
    counts = tally(results.get("tests") or [])
    failed = counts.get("failed", 0) + counts.get("error", 0)
    summary = ", ".join(f"{n} {'FAILED' if k == 'failed' else k}" for k, n in sorted(counts.items())) or "no tests ran"
    print(f"logitcheck: {summary} (impl {meta.get('impl', '?')}, backend {meta.get('backend', '?')}, "
          f"profile {meta.get('profile', '?')})")
    if failed:
        print(f"logitcheck: {failed} FAILED: the report lists each failure with its message")
    if changes is not None:
        print(f"logitcheck: since the baseline: {len(changes.new_failures)} new failure(s), "
              f"{len(changes.regressions)} error regression(s), {len(changes.fixed)} fixed, "
              f"{len(changes.improvements)} improvement(s), {len(changes.kills)} zoo change(s)")
    if meta.get("error"):
        print(f"logitcheck: {meta['error']}")
    print(f"  results: {Path(results_path).resolve()}\n  report:  {html_path.resolve()} "
          f"({html_path.stat().st_size / 1024:.0f} KB)")
    clean = meta.get("pytest_exit", 0) in (0, None)
    return 1 if args.strict and (failed or not clean) else 0


def screenshot(args: argparse.Namespace) -> int:
    from reports.browser import check_page, ink_fraction

    png = args.png or args.page.with_suffix(".png")
    try:
        c = check_page(args.page, png, args.width, args.height)
    except (OSError, RuntimeError, TimeoutError) as exc:
        print(f"logitcheck: {exc}", file=sys.stderr)
        return 2
    p = c.probe
    print(f"logitcheck: {png} ({ink_fraction(png):.0%} ink); {p['tables']} tables, {p['svgs']} plots, "
          f"{p['nodes']:,} elements, page {p['page_width']}x{p['page_height']} px, load {p['load_ms']:.0f} ms")
    for e in c.console_errors:
        print(f"  console error: {e}")
    return 1 if c.console_errors or p["tables_blank"] or p["svgs_blank"] or p["images_broken"] else 0


def main(argv: Sequence[str] | None = None) -> int:
    from properties.api import shadowed_packages

    problems = shadowed_packages()
    if problems:  # before anything imports a shadowed name and fails somewhere deep
        for text in problems:
            print(f"logitcheck: {text}", file=sys.stderr)
        return 2
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler | None = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
