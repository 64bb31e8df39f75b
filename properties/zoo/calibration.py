"""Is the judge right both ways? Run the suite's own properties against the conforming zoo (every
failure is a false alarm) and the near-threshold zoo (every survivor is a miss).

    python -m properties.zoo.calibration [--zoo conforming|near|all] [--only a,b] [--examples 40]
                                         [--mode inprocess|pytest] [--jobs 2] [--json out.json]

``inprocess`` (default) imports the property bodies: the sampler bodies of the bug-zoo runner
(``properties.zoo.runner.PROPERTIES``: impl ≡ oracle per dtype, exact boundaries, no-ops,
monotonicity, min_keep, softmax invariants, the distribution gate, batch invariance, bad rows)
and every op property (``properties.ops_properties.PROPERTIES``) per dtype, restricted to the
properties that call a function the member replaces. Each runs ``--examples`` derandomized
examples from one fixed seed, the same examples for every member, with no shrinking and without
stopping at a failure: a row says how many examples failed and which was first.

``pytest`` runs the domain's test files in a subprocess (``--impl`` the member, the ci profile,
``--lc-results``): it adds the chain properties (truncation ≡ masking, GPU prefix / CPU suffix),
the fixed distribution rows and determinism, at the cost of a pytest start per member.

gpu_impl itself is always run as the control: a property it fails is the suite's own problem,
and a mutant "killed" only where the control fails too is not counted as killed.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any, Callable

import numpy as np
from hypothesis import HealthCheck, Phase, given, seed, settings

SEED = 20260
SAMPLER_TESTS = ("test_impl_vs_oracle.py", "test_invariants.py", "test_masking.py", "test_split_chain.py",
                 "test_distribution.py", "test_row_contract.py", "test_boundary_conventions.py",
                 "test_determinism.py")
OP_TESTS = ("test_ops.py", "test_attention.py", "test_ops_bad_input.py")
CONTROL = "gpu_impl"


@dataclasses.dataclass
class Row:
    member: str
    prop: str
    ran: int = 0
    failed: int = 0
    first: int | None = None
    why: str = ""
    seconds: float = 0.0


def members(zoo: str) -> list[tuple[str, str]]:
    """(zoo, member) pairs, the control first."""
    from properties.zoo.conforming import MEMBERS
    from properties.zoo.near_threshold import NEAR_MUTANTS

    out = [("control", CONTROL)]
    if zoo in ("conforming", "all"):
        out += [("conforming", m) for m in MEMBERS]
    if zoo in ("near", "all"):
        out += [("near", m.name) for m in NEAR_MUTANTS]
    return out


def modules(zoo: str, name: str):
    """(samplers module, ops module, names of the functions the member replaces)."""
    import importlib

    if zoo == "control":
        return importlib.import_module("gpu_impl"), importlib.import_module("gpu_impl.ops"), None
    if zoo == "conforming":
        s = importlib.import_module(f"properties.zoo.conforming.{name}")
        o = importlib.import_module(f"properties.zoo.conforming.{name}.ops")
        return s, o, set(s.REPLACED) | {f"ops.{f}" for f in o.REPLACED}
    from properties.zoo.near_threshold import NEAR_BY_NAME, mutant_modules

    m = NEAR_BY_NAME[name]
    s, o = mutant_modules(name)
    return s, o, {m.replaces if m.domain == "samplers" else f"ops.{m.replaces}"}


@dataclasses.dataclass(frozen=True)
class Prop:
    name: str
    uses: frozenset[str]
    draw: Callable[[], Any]
    body: Callable[[Any, Any], Any]
    ops: bool
    cap: int


def properties(examples: int) -> list[Prop]:
    """The in-process properties, in a fixed order (samplers as the bug-zoo runner orders them)."""
    from properties.ops.suite import PROPERTIES as OPS
    from properties.zoo.runner import PROPERTIES as SAMPLERS

    out = [Prop(p.name, p.uses, lambda p=p: p.draw(1, 262144), p.body, False, min(p.cap, examples))
           for p in SAMPLERS]
    for p in OPS:
        uses = {f"ops.{p.op}"} | ({"ops.attention"} if p.op == "attention_step" else set())
        out += [Prop(f"{p.name}-{d}", frozenset(uses), lambda p=p, d=d: p.draw(d), p.body, True, examples)
                for d in p.dtypes]
    return out


def run_one(prop: Prop, impl: Any, member: str) -> Row:
    from properties.backends import NotCovered

    row = Row(member, prop.name)
    start = time.perf_counter()

    @seed(SEED)
    @settings(max_examples=prop.cap, derandomize=True, database=None, deadline=None,
              phases=(Phase.explicit, Phase.generate), suppress_health_check=list(HealthCheck))
    @given(example=prop.draw())
    def search(example: Any) -> None:
        row.ran += 1
        try:
            with np.errstate(all="ignore"):
                prop.body(impl, example)
        except NotCovered:
            raise
        except Exception as exc:  # a PropertyFailure, or a crash on valid input: both fail the suite
            row.failed += 1
            if row.first is None:
                kind = "" if isinstance(exc, AssertionError) else f"{type(exc).__name__}: "
                row.first, row.why = row.ran, (kind + str(exc)).split("\nCASE")[0][:400]

    try:
        search()
    except NotCovered as exc:
        row.why = f"not covered: {exc}"
    except Exception as exc:  # hypothesis could not draw (health, strategy): shown, not hidden
        row.why = f"could not run: {type(exc).__name__}: {exc}"[:400]
    row.seconds = round(time.perf_counter() - start, 2)
    return row


def run_member(zoo: str, name: str, examples: int, touched: set[str] | None = None) -> list[Row]:
    """Every relevant property on one member; the control runs what ``touched`` names."""
    from properties.backends import Impl

    s, o, replaced = modules(zoo, name)
    replaced = replaced if replaced is not None else touched
    impls = (Impl(s, "numpy"), Impl(o, "numpy"))
    return [run_one(p, impls[p.ops], name) for p in properties(examples) if p.uses & replaced]


def run_pytest(zoo: str, name: str, examples: int) -> list[Row]:
    """The domain's test files in a subprocess; one row per test id that did not pass."""
    s, o, replaced = modules(zoo, name)
    impl = {"control": "gpu_impl", "conforming": f"properties.zoo.conforming.{name}"}.get(
        zoo, "properties.zoo.near_threshold.selected")
    samplers = replaced is None or any(not r.startswith("ops.") for r in replaced)
    ops = replaced is None or any(r.startswith("ops.") for r in replaced)
    files = [f"properties/{f}" for f in (SAMPLER_TESTS if samplers else ()) + (OP_TESTS if ops else ())]
    env = {**os.environ, "LOGITCHECK_NEAR_MUTANT": name}
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "results.json"
        start = time.perf_counter()
        subprocess.run([sys.executable, "-m", "pytest", *files, "--impl", impl, "--hypothesis-profile=ci",
                        "-p", "no:cacheprovider", "-q", "--lc-results", str(out)],
                       env=env, capture_output=True, text=True)
        tests = json.loads(out.read_text())["tests"] if out.exists() else []
        seconds = round(time.perf_counter() - start, 1)
    rows = [Row(name, t["nodeid"].split("::")[-1], 1, int(t["outcome"] == "failed"), 1 if t["outcome"] == "failed" else None,
                t["reason"].split("\n")[0][:400]) for t in tests if t["outcome"] != "passed"]
    return rows + [Row(name, "(pytest run)", len(tests), sum(r.failed for r in rows), None, "", seconds)]


def _job(args: tuple) -> tuple[str, str, list[Row]]:
    zoo, name, examples, mode, touched, outdir = args
    rows = run_pytest(zoo, name, examples) if mode == "pytest" else run_member(zoo, name, examples, touched)
    if outdir:  # one file per member as it finishes: a run cut short keeps what it measured
        Path(outdir, f"{zoo}-{name}.json").write_text(json.dumps(
            {"zoo": zoo, "member": name, "rows": [dataclasses.asdict(r) for r in rows]}))
    return zoo, name, rows


def calibrate(zoo: str = "all", only: list[str] | None = None, examples: int = 40, mode: str = "inprocess",
              jobs: int = 1, outdir: str = "") -> dict[str, Any]:
    chosen = [(z, n) for z, n in members(zoo) if not only or n in only or z == "control"]
    touched: set[str] = set()
    for z, n in chosen:
        if z != "control":
            touched |= modules(z, n)[2]
    work = [(z, n, examples, mode, touched, outdir) for z, n in chosen]
    if jobs > 1:
        with ProcessPoolExecutor(jobs) as pool:
            done = list(pool.map(_job, work))
    else:
        done = [_job(w) for w in work]
    return {"examples": examples, "mode": mode, "seed": SEED,
            "runs": [{"zoo": z, "member": n, "rows": [dataclasses.asdict(r) for r in rows]} for z, n, rows in done]}


def main(argv: list[str] | None = None) -> None:
    from properties.zoo.calibration_report import markdown

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--zoo", choices=("conforming", "near", "all"), default="all")
    ap.add_argument("--only", default="", help="comma-separated member / mutant names")
    ap.add_argument("--examples", type=int, default=40, help="examples per property (ci profile: 40)")
    ap.add_argument("--mode", choices=("inprocess", "pytest"), default="inprocess")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--json", default="", help="write the raw results here")
    ap.add_argument("--outdir", default="", help="also write one JSON per member as it finishes")
    ap.add_argument("--collect", default="", help="only tabulate the per-member files of this directory")
    a = ap.parse_args(argv)
    if a.collect:
        runs = [json.loads(f.read_text()) for f in sorted(Path(a.collect).glob("*.json"))]
        order = {n: i for i, (_, n) in enumerate(members("all"))}
        runs.sort(key=lambda r: order.get(r["member"], len(order)))
        print(markdown({"examples": a.examples, "mode": a.mode, "seed": SEED, "runs": runs}))
        return
    res = calibrate(a.zoo, [s for s in a.only.split(",") if s], a.examples, a.mode, a.jobs, a.outdir)
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))
    print(markdown(res))


if __name__ == "__main__":
    main()
