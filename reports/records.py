"""Per-record table: for each sampler/op/format, what ran, how often, and its worst error against
its model. Joins the three lists of results.json by record name; computes nothing numeric."""
from __future__ import annotations

import math
import re
from collections import Counter, defaultdict
from typing import Any

from reports.tables import as_float, records_table

_PARAM_ID = re.compile(r"\[(.*)\]$")


def param_tokens(nodeid: str) -> set[str]:
    """``test_x[top_k-float32]`` → {"top_k", "float32"}: pytest joins parametrize ids with '-'."""
    m = _PARAM_ID.search(nodeid)
    return set(m.group(1).split("-")) if m else set()


def _worse(a: dict[str, Any] | None, b: dict[str, Any]) -> bool:
    """Is measurement b worse than a? NaN counts as the worst possible."""
    if a is None:
        return True
    ra, rb = as_float(a.get("ratio")), as_float(b.get("ratio"))
    if math.isnan(rb):
        return not math.isnan(ra)
    return not math.isnan(ra) and rb > ra


def record_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    worst_error = [r for r in results.get("worst_error") or [] if isinstance(r, dict) and "record" in r]
    examples = [r for r in results.get("examples") or [] if isinstance(r, dict) and "record" in r]
    tests = [t for t in results.get("tests") or [] if isinstance(t, dict)]

    props: dict[str, Counter] = defaultdict(Counter)
    for e in examples:
        props[str(e["record"])][str(e.get("property", "?"))] += int(as_float(e.get("count", 0)) or 0)
    worst: dict[str, dict[str, Any]] = {}
    for w in worst_error:
        rec = str(w["record"])
        props[rec].setdefault(str(w.get("property", "?")), 0)
        if _worse(worst.get(rec), w):
            worst[rec] = w
    outcomes: dict[str, Counter] = defaultdict(Counter)
    for t in tests:
        toks = param_tokens(str(t.get("nodeid", "")))
        for rec in props:
            if rec in toks:
                outcomes[rec][str(t.get("outcome"))] += 1

    rows = []
    for rec in sorted(props):
        w = worst.get(rec) or {}
        oc = outcomes.get(rec, Counter())
        rows.append({
            "record": rec,
            "properties run": ", ".join(f"{p} ×{n}" for p, n in sorted(props[rec].items())),
            "examples": sum(props[rec].values()),
            "tests pass / fail / skip": f"{oc.get('passed', 0)} / {oc.get('failed', 0)} / {oc.get('skipped', 0)}"
            if oc else "—",
            "worst error (u)": w.get("worst_u"),
            "model bound (u)": w.get("bound_u"),
            "ratio": w.get("ratio"),
            "where": f"{w.get('property', '?')}, {w.get('dtype', '?')}" if w else "",
            "_measured": bool(w),
            "_failed": oc.get("failed", 0),
        })
    return rows


def _row_class(row: dict[str, Any]) -> str:
    r = as_float(row.get("ratio")) if row.get("ratio") is not None else 0.0
    return "bad" if row.get("_failed") or math.isnan(r) or r > 1.0 else ""


def records_section(results: dict[str, Any]) -> str:
    rows = record_rows(results)
    if not rows:
        return ('<section id="records"><h2>Records</h2><p class="muted">No examples or errors were recorded '
                "(no property ran, or the selection excluded them all).</p></section>")
    measured = [r for r in rows if r["_measured"]]
    exact = [r for r in rows if not r["_measured"]]
    exact_failed = [r for r in exact if r["_failed"]]
    exact_ok = [r for r in exact if not r["_failed"]]
    cols = ["record", "properties run", "examples", "tests pass / fail / skip", "worst error (u)",
            "model bound (u)", "ratio", "where"]
    exact_cols = cols[:4]
    parts = [records_table(measured, columns=cols, row_class=_row_class) if measured else
             '<p class="muted">No record measured an error in units of u.</p>']
    if exact_failed:
        parts.append(f"<h3>Exact or set-valued properties with a failing test ({len(exact_failed)})</h3>"
                     + records_table(exact_failed, columns=exact_cols, row_class=_row_class))
    if exact_ok:
        n_ex = sum(int(r["examples"]) for r in exact_ok)
        parts.append(f"<details><summary>{len(exact_ok)} records checked by exact or set-valued properties "
                     f"only ({n_ex:,} examples; no failing test)</summary>"
                     + records_table(exact_ok, columns=exact_cols) + "</details>")
    detail = [r for r in results.get("worst_error") or [] if isinstance(r, dict)]
    detail_html = records_table(detail, preferred=["record", "property", "dtype", "worst_u", "bound_u", "ratio"],
                                row_class=lambda r: "bad" if not as_float(r.get("ratio")) <= 1.0 else "")
    return f"""<section id="records"><h2>Records: examples and worst error</h2>
<p class="muted">Errors are in units of the compute dtype's unit roundoff u; <i>ratio</i> = worst error / the
error model's bound at that element (≤ 1 is within the model). Rows in red failed a test or exceed the model.
Records whose properties are exact or set-valued (no error in u) are listed separately. Test counts match
records by their pytest parameter id ("—": no test id names the record).</p>
{"".join(parts)}
<details><summary>Worst error per record, property and input dtype ({len(detail)} rows)</summary>{detail_html}</details>
</section>"""
