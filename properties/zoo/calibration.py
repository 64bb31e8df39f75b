"""Is the judge right both ways? The conforming zoo (correct engines: every failure is a false
alarm) and the near-threshold zoo (small bugs: every survivor is a miss), hunted by the one runner
(``properties.zoo.runner.hunt``) with the suite's own property bodies under the active contract.

    python -m properties.zoo.calibration [--zoo conforming|near|all] [--only a,b] [--examples 40]
                                         [--contract default|strict] [--json out.json]

A conforming member runs every property of each domain it replaces a function of (samplers over
the whole vocabulary range, ops), ``--examples`` drawn examples per property plus the property's
pinned corners, stopping a property at its first failure. A near-threshold mutant is hunted until
its first kill; each kill is replayed on the unmutated gpu_impl (``runner.control``): a kill the
control shares is the suite's false alarm, not a catch. The same functions build the tables the
CI tests (``test_calibration_zoos.py``) record for the report. For the whole test files on a
member (chains, distribution rows, determinism), run pytest on it:
``python -m pytest --impl properties.zoo.conforming.llama_cpp_cpu``.
"""
from __future__ import annotations

import argparse
import importlib
import json
import time
from pathlib import Path
from typing import Any

from properties import numerics
from properties.zoo import domain
from properties.zoo.runner import Hunt, control, hunt

FULL_RANGE = {"min_vocab": 1, "max_vocab": 262144}


def member_domains(member: str) -> list[tuple[str, str, frozenset[str]]]:
    """(domain, module name, functions it replaces) for each domain the member touches."""
    out = []
    for dom, mod in (("samplers", f"properties.zoo.conforming.{member}"), ("ops", f"properties.zoo.conforming.{member}.ops")):
        replaced = frozenset(importlib.import_module(mod).REPLACED)
        if replaced:
            out.append((dom, mod, replaced))
    return out


def conforming_hunts(member: str, budget: int, backend: str = "numpy") -> list[Hunt]:
    """Every property of every domain the member touches that calls a function it replaces."""
    return [hunt(mod, domain(dom), budget, backend, until_first_kill=False, uses=replaced,
                 scope=FULL_RANGE if dom == "samplers" else None)
            for dom, mod, replaced in member_domains(member)]


def false_alarm_rows(member: str, hunts: list[Hunt]) -> list[dict[str, Any]]:
    """One row per (member, record): properties run, failing properties, the first failure."""
    rows: dict[str, dict[str, Any]] = {}
    for h in hunts:
        for r in h.results:
            rec = record_of(r.property)
            row = rows.setdefault(rec, {"member": member, "record": rec, "properties": 0, "examples": 0,
                                        "false_alarms": 0, "first": ""})
            row["properties"] += 1
            row["examples"] += r.ran
            if r.killed:
                row["false_alarms"] += 1
                row["first"] = row["first"] or f"{r.property} (example {r.examples_to_kill}): {r.why.splitlines()[0][:240]}"
    return list(rows.values())


def record_of(prop: str) -> str:
    """The record (sampler or op) a property name judges: ``impl_vs_oracle[top_p/float16]`` ->
    top_p, ``impl_vs_oracle[matmul]/float32`` -> matmul, ``causality/bfloat16`` -> causality."""
    inner = prop[prop.index("[") + 1:prop.index("]")] if "[" in prop else prop.split("/")[0]
    return inner.split("/")[0]


def near_hunt(dom: str, name: str, budget: int, backend: str = "numpy") -> tuple[Hunt, list]:
    """A near-threshold mutant hunted to its first kill, and that kill replayed on gpu_impl."""
    from properties.zoo.near_threshold import NEAR, NEAR_BY_NAME

    mutant = next(m for m in NEAR[dom] if m.name == name)
    before = numerics.active_contract().name
    numerics.use_contract(NEAR_BY_NAME[name].contract)  # a bug under that contract (strict: dist's double sum)
    try:
        found = hunt(mutant, domain(dom), budget, backend)
        return found, control(found, domain(dom), backend)
    finally:
        numerics.use_contract(before)


def kill_row(dom: str, found: Hunt, replays: list) -> dict[str, Any]:
    from properties.zoo.near_threshold import NEAR_BY_NAME

    kill = found.first_kill
    false_kill = any(r.killed for r in replays)
    ran = sum(r.ran for r in found.results)
    return {"mutant": found.target, "domain": dom, "size": NEAR_BY_NAME[found.target].size,
            "killed": kill is not None and not false_kill, "killed_by": kill.property if kill else None,
            "examples_to_kill": ran if kill else None, "examples_run": ran, "control_fails_too": false_kill,
            "why": kill.why.splitlines()[0][:300] if kill else ""}


def calibrate(zoo: str = "all", only: list[str] | None = None, examples: int = 40) -> dict[str, Any]:
    from properties.zoo.conforming import MEMBERS
    from properties.zoo.near_threshold import NEAR

    out: dict[str, Any] = {"examples": examples, "contract": numerics.contract().name, "conforming": [], "near": []}
    if zoo in ("conforming", "all"):
        for m in MEMBERS:
            if only and m not in only:
                continue
            start = time.perf_counter()
            rows = false_alarm_rows(m, conforming_hunts(m, examples))
            for r in rows:
                r["seconds"] = round(time.perf_counter() - start, 1) if r is rows[0] else 0.0
            out["conforming"] += rows
    if zoo in ("near", "all"):
        for dom, mutants in NEAR.items():
            for mutant in mutants:
                if not only or mutant.name in only:
                    out["near"].append(kill_row(dom, *near_hunt(dom, mutant.name, examples)))
    return out


def _md(rows: list[dict[str, Any]], keys: list[str]) -> list[str]:
    cell = lambda v: str(v).replace("|", "\\|").replace("\n", " ")  # noqa: E731
    return ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)] + [
        "| " + " | ".join(cell(r.get(k, "")) for k in keys) + " |" for r in rows]


def markdown(res: dict[str, Any]) -> str:
    lines = [f"Contract: {res['contract']}; {res['examples']} drawn examples per property plus its corners.", ""]
    if res["conforming"]:
        alarms = sum(r["false_alarms"] for r in res["conforming"])
        lines += [f"## Conforming zoo: {alarms} false alarm(s)", ""]
        lines += _md(res["conforming"], ["member", "record", "properties", "examples", "false_alarms", "first"])
    if res["near"]:
        killed = sum(r["killed"] for r in res["near"])
        lines += ["", f"## Near-threshold zoo: {killed} of {len(res['near'])} killed", ""]
        lines += _md(res["near"], ["mutant", "size", "killed", "killed_by", "examples_to_kill", "why"])
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--zoo", choices=("conforming", "near", "all"), default="all")
    ap.add_argument("--only", default="", help="comma-separated member / mutant names")
    ap.add_argument("--examples", type=int, default=40, help="drawn examples per property (ci profile: 40)")
    ap.add_argument("--contract", choices=tuple(numerics.CONTRACTS), default="default")
    ap.add_argument("--json", default="", help="write the raw results here")
    a = ap.parse_args(argv)
    numerics.use_contract(a.contract)
    res = calibrate(a.zoo, [s for s in a.only.split(",") if s], a.examples)
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1))
    print(markdown(res))


if __name__ == "__main__":
    main()
