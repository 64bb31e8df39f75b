"""``logitcheck device-check``: one command for a run on a CUDA device.

Steps, each with its own time limit so that one slow step cannot starve the others:
1. probe: the device, NVRTC and cuBLAS (``properties.backends.cupy_device_reason``); without a
   usable device the command stops here with exit status 1;
2. smoke: ``properties/gpu`` less the emulator's CPU tests (every kernel compiled and run, kernels vs NumPy and the oracle,
   NumPy vs CuPy backends on fp32/fp16/bf16, a chain replayed from a CUDA graph);
3. benchmarks: ``properties.gpu.device_bench.run_all`` (each kernel and the default chain against
   the torch sort-based reference and the one-read bandwidth floor);
4. suite: the property suite with ``--backend cupy`` (pytest-xdist workers when installed), less
   the rooms that never run on the backend (``HOST_ONLY_ROOMS``; ``--all-rooms`` keeps them);
5. report: ``OUT/results.json`` and ``OUT/index.html`` with the GPU tables added.
Exit status 0 when smoke and suite passed, 1 otherwise (2: no page could be written).
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
HOST_ONLY_ROOMS = ("meta", "peers", "protocol")
"""Rooms the suite step leaves out: their tests judge the oracle against real engines (peers),
drive harness processes (protocol) or judge the judge on NumPy (meta), never through
``--backend``, so they run the same on CPU CI (a meta test holds that). They were about a quarter
of the suite's tests and its slowest subprocess runs: the whole suite did not finish in 280 s on
an H100 with 16 workers, inside a device budget of 15 minutes for two device-checks."""

CPU_ONLY_GPU_TESTS = ("test_kernels_emulated.py", "test_emulator.py")
"""Files of properties/gpu the smoke step leaves out: the kernels emulated on the CPU."""


def add_parser(sub: Any) -> None:
    d = sub.add_parser("device-check", help="smoke test, suite with --backend cupy and benchmarks on a CUDA device",
                       description=__doc__.split("\n\n")[0])
    d.add_argument("--out", type=Path, default=Path("device-report"), help="output directory (default ./device-report)")
    d.add_argument("--profile", default="ci", help="hypothesis profile of the suite (default ci)")
    d.add_argument("--workers", type=int, default=min(12, os.cpu_count() or 1),
                   help="pytest-xdist workers for smoke and suite (default min(12, cores))")
    d.add_argument("--smoke-timeout", type=int, default=150)
    d.add_argument("--bench-timeout", type=int, default=120)
    d.add_argument("--suite-timeout", type=int, default=420,
                   help="seconds for the suite step (default 420: it took over 250 s on an H100 with 15 workers)")
    d.add_argument("--suite-paths", default="properties",
                   help="comma-separated test paths of the suite step (default: every room that runs on the backend)")
    d.add_argument("--all-rooms", action="store_true",
                   help=f"the suite step also runs the host-only rooms ({', '.join(HOST_ONLY_ROOMS)})")
    d.add_argument("--skip", default="", help="comma-separated steps to leave out: smoke, bench, suite")
    d.set_defaults(handler=device_check)


def _pytest(args: list[str], out: Path, name: str, workers: int, timeout: int) -> dict[str, Any]:
    """Run pytest in a child process; returns the outcome counts read from its JUnit XML."""
    # -v: one line per finished test, so a step stopped at its time limit still names what ran and failed
    cmd = [sys.executable, "-m", "pytest", *args, "-p", "no:cacheprovider", "-v", "-rfE", "--tb=short",
           f"--junitxml={out / (name + '.xml')}"]
    if workers > 1 and importlib.util.find_spec("xdist"):
        cmd += ["-n", str(workers)]
    t0 = time.monotonic()
    print(f"device-check: {name}: {' '.join(cmd[3:])}", flush=True)
    with open(out / f"{name}.log", "w") as log:
        try:
            code = subprocess.run(cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            code = "timeout"
    counts = _junit_counts(out / f"{name}.xml") if code != "timeout" else _log_counts(out / f"{name}.log")
    res = {"step": name, "exit": code, "seconds": round(time.monotonic() - t0, 1), **counts,
           "why": _streamed_whys(args)}
    print(f"device-check: {name}: {res}", flush=True)
    return res


def _streamed_whys(args: list[str]) -> dict[str, str]:
    """Each failed test's first reason line, from the failures the plugin streams next to the
    step's ``--lc-results`` file as they happen (there also when the step was stopped)."""
    if "--lc-results" not in args:
        return {}
    path = Path(args[args.index("--lc-results") + 1] + ".failures.jsonl")
    whys: dict[str, str] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return whys
    for line in lines:
        try:
            row = json.loads(line)
        except ValueError:
            continue
        why = (row.get("failure") or {}).get("why") or row.get("reason", "")
        whys[row["nodeid"]] = " ".join(str(why).split())[:400]
    return whys


def _junit_counts(path: Path) -> dict[str, Any]:
    import xml.etree.ElementTree as ET
    try:
        root = ET.parse(path).getroot()
    except (OSError, ET.ParseError):
        return {"tests": 0, "failed": None}
    suite = root if root.tag == "testsuite" else root.find("testsuite")
    failed = [f"{c.get('classname')}::{c.get('name')}" for c in suite.iter("testcase")
              if c.find("failure") is not None or c.find("error") is not None]
    get = lambda k: int(suite.get(k, 0))  # noqa: E731
    return {"tests": get("tests"), "failed": len(failed), "skipped": get("skipped"), "failures": failed[:50]}


_VERDICT = re.compile(r"(PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)")


def _nodeid(junit_name: str) -> str:
    """JUnit's ``pkg.mod::test[x]`` as pytest's ``pkg/mod.py::test[x]``."""
    mod, _, test = junit_name.partition("::")
    return f"{mod.replace('.', '/')}.py::{test}"


def _log_counts(path: Path) -> dict[str, Any]:
    """Counts from pytest's verbose log, for a step killed at its time limit (no JUnit XML then).
    Lines look like ``[gw3] [ 82%] FAILED properties/x.py::test_y[z]`` (xdist) or
    ``properties/x.py::test_y[z] FAILED [ 82%]``; the summary's ``FAILED nodeid - msg`` lines are
    not written before the end, so each test is counted once."""
    seen: dict[str, str] = {}
    try:
        lines = path.read_text(errors="replace").splitlines()
    except OSError:
        return {"tests": 0, "failed": None}
    for line in lines:
        words = line.split()
        verdict = next((w for w in words if _VERDICT.fullmatch(w)), None)
        node = next((w for w in words if "::" in w), None)
        if verdict and node:
            seen[node] = verdict
    failed = sorted(n for n, v in seen.items() if v in ("FAILED", "ERROR"))
    return {"tests": len(seen), "failed": len(failed), "skipped": sum(v == "SKIPPED" for v in seen.values()),
            "failures": failed[:50], "incomplete": True}


def device_check(args: argparse.Namespace) -> int:
    from properties.api import cupy_device_reason
    out: Path = args.out.resolve()
    out.mkdir(parents=True, exist_ok=True)
    reason = cupy_device_reason()
    if reason:
        print(f"device-check: no usable CUDA device: {reason}", file=sys.stderr)
        return 1
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    steps: list[dict[str, Any]] = []
    if "smoke" not in skip:
        # the emulator's tests are CPU checks CI runs; on the device they would only spend its time
        steps.append(_pytest(["properties/gpu", *[f"--ignore=properties/gpu/{f}" for f in CPU_ONLY_GPU_TESTS],
                              "--hypothesis-profile", args.profile,
                              "--lc-results", str(out / "smoke-results.json")], out, "smoke", args.workers,
                             args.smoke_timeout))
    bench: dict[str, Any] = {}
    if "bench" not in skip:
        bench = _bench(out, args.bench_timeout)
    if "suite" not in skip:
        paths = [p.strip() for p in args.suite_paths.split(",") if p.strip()]
        host_only = [] if args.all_rooms else [f"--ignore=properties/{r}" for r in HOST_ONLY_ROOMS]
        steps.append(_pytest([*paths, "--ignore=properties/gpu", *host_only, "--backend", "cupy", "--hypothesis-profile", args.profile,
                              "--lc-results", str(out / "results.json")], out, "suite", args.workers,
                             args.suite_timeout))
    written = _report(out, steps, bench)
    print("device-check summary:")
    for s in steps:
        cut = " (stopped at its time limit: the tests that finished)" if s.get("incomplete") else ""
        print(f"  {s['step']}: {s['tests']} tests, {s['failed']} failed, {s.get('skipped', 0)} skipped, "
              f"exit {s['exit']}, {s['seconds']} s{cut}")
        for f in s.get("failures") or []:
            print(f"    FAILED {f}")
            why = (s.get("why") or {}).get(f) or (s.get("why") or {}).get(_nodeid(f))
            if why:
                print(f"      WHY {why}")
    if bench.get("table"):
        print(bench["table"])
    if not written:
        return 2
    return 0 if all(s["exit"] == 0 for s in steps) else 1


def _bench(out: Path, timeout: int) -> dict[str, Any]:
    """Benchmarks in a child process (a hung kernel cannot hang the command)."""
    from properties.api import DEVICE_BENCH

    code = (f"import json, sys; from {DEVICE_BENCH} import run_all, table; r = run_all(); "
            "r['table'] = table(r); json.dump(r, open(sys.argv[1], 'w'), indent=1)")
    path = out / "bench.json"
    print("device-check: bench", flush=True)
    try:
        proc = subprocess.run([sys.executable, "-c", code, str(path)], cwd=ROOT, capture_output=True, text=True,
                              timeout=timeout)
        if proc.returncode:
            return {"error": proc.stderr[-3000:]}
    except subprocess.TimeoutExpired:
        return {"error": f"benchmarks timed out after {timeout} s"}
    return json.loads(path.read_text())


def _merge_smoke(results: dict[str, Any], smoke_path: Path) -> None:
    """Add the smoke step's tests (``properties/gpu``, which the suite step leaves out) to the
    suite's results, so the report's GPU backend area shows what ran instead of NOT RUN."""
    try:
        smoke = json.loads(smoke_path.read_text())
    except (OSError, ValueError):
        return
    for key in ("tests", "worst_error", "examples"):
        results.setdefault(key, []).extend(smoke.get(key) or [])
    for name, table in (smoke.get("tables") or {}).items():
        results.setdefault("tables", {}).setdefault(name, table)
    if "meta" not in results and "meta" in smoke:
        results["meta"] = smoke["meta"]


def _report(out: Path, steps: list[dict[str, Any]], bench: dict[str, Any]) -> bool:
    from reports.render import render
    path = out / "results.json"
    try:
        results = json.loads(path.read_text())
    except (OSError, ValueError):
        results = {"meta": {"impl": "gpu_impl", "backend": "cupy", "error": "the suite wrote no results"},
                   "tests": [], "worst_error": [], "examples": [], "tables": {}}
    _merge_smoke(results, out / "smoke-results.json")
    tables = results.setdefault("tables", {})
    tables["gpu_device_check"] = [{k: v for k, v in s.items() if k not in ("failures", "why")} for s in steps]
    if bench.get("timings"):
        tables["gpu_kernel_timings"] = bench["timings"]
        tables["gpu_device"] = {"device": bench.get("device"), "copy_bandwidth_GBps": bench.get("copy_bandwidth_GBps"),
                                "public_chain_us": json.dumps(bench.get("public_chain_us")),
                                "public_us": json.dumps(bench.get("public_us")),
                                "graph_stats": json.dumps(bench.get("graph_stats"))}
    elif bench.get("error"):
        tables["gpu_device"] = {"benchmark_error": bench["error"]}
    path.write_text(json.dumps(results, indent=1, default=str))
    try:
        (out / "index.html").write_text(render(results), encoding="utf-8")
    except ValueError as exc:
        print(f"device-check: cannot render the report: {exc}", file=sys.stderr)
        return False
    return True
