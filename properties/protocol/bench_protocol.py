"""The protocol's cost (a benchmark, never run by CI).

1. Per-call time at V = 262,144 through a harness (``--impl exec:CMD``) against the same function
   in process (gpu_impl on NumPy): temp at t = 1 (a copy in the harness: the protocol's own cost),
   softmax and top_p on [1, V] and [8, V], median of 9 calls; the harness's time includes
   framing, the pipe both ways and the harness's own compute.
2. The ci-profile sampler tests judging the harness against the same tests judging gpu_impl in
   process, same seed, one after the other in this run: wall time of each and the ratio (target
   <= 1.5x).

Run (after ``make -C examples/c``):
    python -m properties.protocol.bench_protocol --harness examples/c/build/harness --out bench-protocol.json
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

V = 262_144
ROOT = Path(__file__).resolve().parents[2]


def per_call(command: str, repeats: int = 9) -> list[dict]:
    import gpu_impl
    from properties.backends import load_impl

    harness = load_impl(f"exec:{command}", "numpy")
    local = load_impl("gpu_impl", "numpy", gpu_impl)
    rows = []
    for batch in (1, 8):
        x = (np.random.default_rng(batch).standard_normal((batch, V)) * 3).astype(np.float32)
        p = np.full(batch, 0.9)
        # temp at t = 1 is a copy in the harness: its time is the protocol's own cost per call
        # (framing, both pipes, the harness's input checks)
        for fn, args in (("temp", (x, 1.0)), ("softmax", (x,)), ("top_p", (x, p, 0))):
            times = {}
            for name, impl in (("harness", harness), ("in_process", local)):
                impl(fn, *args)  # warm
                t = []
                for _ in range(repeats):
                    t0 = time.perf_counter()
                    impl(fn, *args)
                    t.append(time.perf_counter() - t0)
                times[name] = statistics.median(t)
            rows.append({"function": fn, "batch": batch, "vocab": V, "harness_ms": round(times["harness"] * 1e3, 2),
                         "in_process_ms": round(times["in_process"] * 1e3, 2),
                         "mb_each_way": round(x.nbytes / 2**20, 2)})
    harness.module.HARNESS.close()
    return rows


def suite_wall(impl: str, seed: int = 0) -> dict:
    cmd = [sys.executable, "-m", "pytest", "properties/samplers", "-p", "no:cacheprovider", "-q", "--judged-only",
           "--impl", impl, "--hypothesis-profile=ci", f"--hypothesis-seed={seed}"]
    t0 = time.perf_counter()
    run = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env={**os.environ, "CI": "1"})
    wall = time.perf_counter() - t0
    tail = [line for line in run.stdout.splitlines() if "tests judged" in line][:1]
    return {"impl": impl, "wall_s": round(wall, 1), "exit": run.returncode, "judged": tail[0] if tail else ""}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--harness", required=True, help="the harness command (e.g. examples/c/build/harness)")
    ap.add_argument("--out", type=Path, default=Path("bench-protocol.json"))
    ap.add_argument("--skip-suite", action="store_true")
    a = ap.parse_args()
    result = {"measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "cpus": os.cpu_count(),
              "per_call": per_call(a.harness)}
    for row in result["per_call"]:
        print(f"{row['function']:8s} [{row['batch']}, {V}]: harness {row['harness_ms']} ms, "
              f"in process {row['in_process_ms']} ms ({row['mb_each_way']} MiB each way)")
    if not a.skip_suite:
        here, there = suite_wall("gpu_impl"), suite_wall(f"exec:{a.harness}")
        result["suite"] = {"in_process": here, "harness": there, "ratio": round(there["wall_s"] / here["wall_s"], 2)}
        print(f"ci sampler tests: in process {here['wall_s']} s, harness {there['wall_s']} s, "
              f"ratio {result['suite']['ratio']} (target <= 1.5)")
    a.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
