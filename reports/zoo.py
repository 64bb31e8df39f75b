"""Mutation-zoo kill tables: each deliberately broken implementation, and which property caught it.
A surviving mutant is a hole in the suite, so survivors are flagged and counted in the heading."""
from __future__ import annotations

from typing import Any

from reports.tables import esc, generic, records_table

ZOO_TITLES = {"zoo_samplers": "Bug zoo: sampler mutants", "zoo_quants": "Bug zoo: quantization-format mutants",
              "zoo_ops": "Bug zoo: op mutants"}
KILL_TESTS = "zoo/test_zoo.py::test_mutant_is_killed["
"""The kill tests' node ids: ``...[<domain>-<mutant>]`` for the table ``zoo_<domain>``."""
COLUMNS = ("mutant", "description", "killed", "examples_to_kill", "killed_by", "why", "witness")


def is_zoo(name: str) -> bool:
    return name in ZOO_TITLES or name.endswith("_zoo") or name.startswith("zoo")


def _killed(row: dict[str, Any]) -> bool | None:
    """The recorded verdict; a zoo that records only examples_to_kill counts a number there as a kill."""
    k = row.get("killed")
    if isinstance(k, bool):
        return k
    n = row.get("examples_to_kill")
    return True if "killed" not in row and isinstance(n, int) and not isinstance(n, bool) else None


def zoo_rows(value: Any) -> list[dict[str, Any]] | None:
    """A zoo as rows: a list of dicts, or ``{mutant: {...}}`` with the key as the mutant column."""
    if isinstance(value, dict) and value and all(isinstance(v, dict) for v in value.values()):
        return [{"mutant": k, **v} for k, v in value.items()]
    if isinstance(value, list) and value and all(isinstance(r, dict) for r in value):
        return value
    return None


def from_tests(name: str, rows: list[dict[str, Any]], tests: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Mutants whose kill test ran but left no row (a zoo may record only kills): a failed test is
    a survivor (or a false kill); a skipped one has no verdict. A passed one adds nothing."""
    prefix = name[len("zoo_"):] + "-" if name.startswith("zoo_") else None
    listed = {str(r.get("mutant")) for r in rows}
    out = []
    for t in tests:
        node = str(t.get("nodeid", "")) if isinstance(t, dict) else ""
        param = node.split(KILL_TESTS, 1)[1].rstrip("]") if KILL_TESTS in node else ""
        if not prefix or not param.startswith(prefix):
            continue
        mutant = param[len(prefix):]
        outcome = str(t.get("outcome"))
        if mutant in listed or outcome == "passed":
            continue
        out.append({"mutant": mutant, "killed": False if outcome in ("failed", "error") else None,
                    "why": f"test {outcome}: {str(t.get('reason', ''))[:300]}"})
    return out


def zoo_section(name: str, value: Any, tests: list[dict[str, Any]] | None = None) -> str:
    title = ZOO_TITLES.get(name, f"Bug zoo: {name}")
    anchor = f"table-{esc(name)}"
    rows = zoo_rows(value)
    if rows is None:
        return f'<section id="{anchor}"><h3>{esc(title)}</h3>{generic(value)}</section>'
    value = rows + from_tests(name, rows, tests or [])
    kills = [_killed(r) for r in value]
    killed, survived, unknown = kills.count(True), kills.count(False), kills.count(None)
    head = f"{killed} of {len(value)} killed"
    if survived:
        head += f", {survived} SURVIVED"
    if unknown:
        head += f", {unknown} without a recorded verdict"
    table = records_table(value, preferred=COLUMNS,
                          row_class=lambda r: "bad" if _killed(r) is False else "")
    note = ('<p class="note bad">A surviving mutant is a bug the suite cannot see: '
            + ", ".join(f"<code>{esc(r.get('mutant', '?'))}</code>" for r in value if _killed(r) is False)
            + ".</p>") if survived else ""
    return (f'<section id="{anchor}"><h3>{esc(title)} ({esc(head)})</h3>'
            '<p class="muted">examples_to_kill: how many hypothesis examples ran before a property failed '
            f"on the mutant (fewer is a sharper property).</p>{note}{table}</section>")
