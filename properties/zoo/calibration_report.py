"""Markdown tables for ``properties.zoo.calibration`` results: false alarms of the conforming zoo,
kills of the near-threshold zoo (a "kill" where the gpu_impl control fails the same property is
a false kill and does not count)."""
from __future__ import annotations

from typing import Any

from properties.zoo.near_threshold import NEAR_BY_NAME


def _failing(run: dict) -> dict[str, dict]:
    return {r["prop"]: r for r in run["rows"] if r["failed"]}


def _cell(why: str) -> str:
    return why.replace("|", "\\|").replace("\n", " ")[:220]


def conforming_table(res: dict[str, Any]) -> list[str]:
    control = next((_failing(r) for r in res["runs"] if r["zoo"] == "control"), {})
    lines = ["| member | properties run | with false alarms | failing examples | seconds |", "|---|---|---|---|---|"]
    detail = ["", "| member | property | failed / ran | first at | control fails too | first failure |",
              "|---|---|---|---|---|---|"]
    for run in res["runs"]:
        if run["zoo"] not in ("conforming", "control"):
            continue
        rows = run["rows"]
        bad = _failing(run)
        lines.append(f"| {run['member']} | {len(rows)} | {len(bad)} | {sum(r['failed'] for r in rows)} / "
                     f"{sum(r['ran'] for r in rows)} | {sum(r['seconds'] for r in rows):.0f} |")
        for name, r in bad.items():
            detail.append(f"| {run['member']} | {name} | {r['failed']} / {r['ran']} | {r['first']} | "
                          f"{'yes' if name in control else 'no'} | {_cell(r['why'])} |")
    return lines + detail


def record_of(prop: str) -> str:
    """The catalogue record (sampler or op) a property name judges."""
    inner = prop[prop.index("[") + 1:prop.index("]")] if "[" in prop else prop.split("-")[0]
    return inner.split("/")[0]


def per_record_table(res: dict[str, Any]) -> list[str]:
    """False alarms per record: failing properties (examples) per conforming member."""
    runs = [r for r in res["runs"] if r["zoo"] in ("conforming", "control")]
    cells: dict[str, dict[str, list[int]]] = {}
    for run in runs:
        for r in run["rows"]:
            c = cells.setdefault(record_of(r["prop"]), {}).setdefault(run["member"], [0, 0])
            c[0] += bool(r["failed"])
            c[1] += r["failed"]
    names = [r["member"] for r in runs]
    lines = ["| record | " + " | ".join(names) + " |", "|---|" + "---|" * len(names)]
    for rec in sorted(cells):
        row = [(f"{c[0]} ({c[1]})" if c[0] else "0") if (c := cells[rec].get(n)) else "-" for n in names]
        lines.append(f"| {rec} | " + " | ".join(row) + " |")
    return ["Failing properties per record (failing examples in brackets; - = not run):", ""] + lines


def near_table(res: dict[str, Any]) -> list[str]:
    control = next((_failing(r) for r in res["runs"] if r["zoo"] == "control"), {})
    lines = ["| mutant | size | killed | first kill (property: example) | examples to kill | properties killing |",
             "|---|---|---|---|---|---|"]
    killed = total = 0
    for run in res["runs"]:
        if run["zoo"] != "near":
            continue
        total += 1
        seen, first = 0, None
        kills = [r for r in run["rows"] if r["failed"] and r["prop"] not in control]
        for r in run["rows"]:
            if r["failed"] and r["prop"] not in control:
                first = (r["prop"], r["first"], seen + r["first"])
                break
            seen += r["ran"]
        killed += first is not None
        size = NEAR_BY_NAME[run["member"]].size
        lines.append(f"| {run['member']} | {_cell(size)} | {'yes' if first else '**no**'} | "
                     f"{f'{first[0]}: {first[1]}' if first else '-'} | {first[2] if first else f'survived {seen}'} | "
                     f"{len(kills)} / {len(run['rows'])} |")
    return [f"Killed {killed} of {total} near-threshold mutants ({res['examples']} examples per property, "
            f"mode {res['mode']}).", ""] + lines


def markdown(res: dict[str, Any]) -> str:
    out = []
    if any(r["zoo"] == "conforming" for r in res["runs"]):
        out += ["## Conforming zoo: false alarms", ""] + conforming_table(res) + [""] + per_record_table(res) + [""]
    if any(r["zoo"] == "near" for r in res["runs"]):
        out += ["## Near-threshold zoo: kills", ""] + near_table(res)
    return "\n".join(out)
