"""What each misbehaving harness costs the judge (a measurement, never run by CI): per fault of
``testing/pyharness.py``, the verdicts of four calls (three to the faulty function, then one to a
correct one), their wall time, the judge's peak resident memory, the process starts, and whether
a harness process outlived the judge.

Each fault runs in a fresh judge process, the harness's timeout set to ``--timeout`` and the
restart policy's test set to one fixed name (as inside one test). ``--client-tree DIR`` runs the
judge from another checkout (e.g. ``git archive`` of an older commit) against this checkout's
pyharness, for old -> new figures; an older judge greets with version 1 and the pyharness
answers in version 1.

    python -m properties.protocol.bench_faults --out bench-faults.json [--client-tree /tmp/old]
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CALL_FAULTS = ("crash", "hang", "malformed", "short", "short_wait", "wrong_shape", "wrong_dtype", "f64", "nan",
               "trailing", "late_duplicate", "chatty", "chatty_crash", "huge_1g", "huge_64g", "close_stdout",
               "ignore_eof", "failed")
HANDSHAKE_FAULTS = ("bad", "hang", "exit")

JUDGE = r"""
import json, os, resource, sys, time
import numpy as np
import gpu_impl
from properties.protocol.harness import exec_module
x = np.random.default_rng(0).normal(size=(2, 300)).astype(np.float32)
p = np.array([0.9, 0.5])
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
t0 = time.monotonic()
verdicts = []
try:
    m = exec_module(sys.argv[1])
    calls = [("top_p", lambda: m.top_p(x, p, 0), gpu_impl.top_p(x, p, 0))] * 3 + \
            [("softmax", lambda: m.softmax(x), gpu_impl.softmax(x))]
    for name, call, want in calls:
        try:
            got = call()
            verdicts.append("ok" if np.array_equal(np.asarray(got), want, equal_nan=True) else "WRONG ANSWER")
        except BaseException as exc:
            verdicts.append(f"{type(exc).__name__}: {str(exc)[:160]}")
        time.sleep(0.05)
except BaseException as exc:
    verdicts.append(f"{type(exc).__name__} at start: {str(exc)[:160]}")
h = getattr(m, "HARNESS", None) if "m" in dir() else None
wall = time.monotonic() - t0
proc = getattr(h, "proc", None)
print(json.dumps({"verdicts": verdicts, "wall_s": round(wall, 2),
                  "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
                  "rss_before_mb": round(base / 1024, 1),
                  "starts": getattr(h, "starts", None) or (1 + getattr(h, "restarts", 0)),
                  "harness_pid": proc.pid if proc is not None else None}))
"""


def alive(pid: int) -> bool:
    """Running (a zombie nobody reaps in a container does not count)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state != "Z"


def run_one(client: Path, args: str, timeout: float) -> dict:
    harness = f"cd {ROOT} && exec env PYTHONPATH={ROOT} {sys.executable} -m properties.protocol.testing.pyharness " \
              f"--functions softmax,top_p {args}"
    env = {**os.environ, "PYTHONPATH": str(client), "LOGITCHECK_EXEC_TIMEOUT": str(timeout),
           "PYTEST_CURRENT_TEST": "bench_faults.py::one_test (call)"}
    t0 = time.monotonic()
    run = subprocess.run([sys.executable, "-c", JUDGE, harness], cwd=client, env=env, capture_output=True,
                         text=True, timeout=600)
    total = time.monotonic() - t0
    lines = [line for line in run.stdout.splitlines() if line.startswith("{")]
    row = json.loads(lines[-1]) if lines else {"verdicts": [f"judge exited {run.returncode}: {run.stderr[-300:]}"]}
    row["judge_exit_s"] = round(total, 2)
    pid = row.get("harness_pid")
    time.sleep(0.5)
    row["outlived_judge"] = bool(pid) and alive(pid)
    if row["outlived_judge"]:  # the measurement's own orphan: its process group, started by this run
        os.killpg(pid, signal.SIGKILL)
    return row


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--client-tree", type=Path, default=ROOT)
    ap.add_argument("--timeout", type=float, default=2.0)
    ap.add_argument("--only", default="")
    ap.add_argument("--out", type=Path, default=Path("bench-faults.json"))
    a = ap.parse_args()
    cases = [(f, f"--fault {f} --on top_p") for f in CALL_FAULTS] + \
            [(f"handshake_{f}", f"--handshake {f}") for f in HANDSHAKE_FAULTS]
    only = set(filter(None, a.only.split(",")))
    result = {"measured": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), "client": str(a.client_tree),
              "timeout_s": a.timeout, "faults": {}}
    for name, args in cases:
        if only and name not in only:
            continue
        row = run_one(a.client_tree.resolve(), args, a.timeout)
        result["faults"][name] = row
        print(f"{name:16s} {row.get('wall_s', '?'):>6} s  peak {row.get('peak_rss_mb', '?'):>7} MB  "
              f"starts {row.get('starts', '?')}  outlived {row['outlived_judge']}  {row['verdicts'][0][:90]!r}")
    a.out.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
