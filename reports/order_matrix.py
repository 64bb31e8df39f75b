"""The sampler order matrix: does applying A then B give the same distribution as B then A?
Grid cells carry the witness on hover (title attribute); the witnesses are also tabled in full."""
from __future__ import annotations

from typing import Any

from reports.tables import cell, compact_json, esc, fmt_num, generic, inline, truncate

SYMBOL = {"commute": ("=", "commute"), "differs": ("≠", "differs"), "untested": ("·", "untested")}


def _cells(value: dict[str, Any]) -> list[dict[str, Any]]:
    cells = value.get("cells")
    if isinstance(cells, dict):  # tolerate {"A|B": {...}} or {"A,B": {...}} keyed forms
        out = []
        for key, v in cells.items():
            first, _, second = str(key).replace(",", "|").partition("|")
            out.append({"first": first, "second": second, **(v if isinstance(v, dict) else {"relation": v})})
        return out
    return [c for c in cells or [] if isinstance(c, dict)]


def _witness(c: dict[str, Any]) -> str:
    """The witness on one line, without the fields the row already shows."""
    w = c.get("witness")
    if isinstance(w, dict):
        w = {k: v for k, v in w.items() if not (k in ("first", "second", "tvd") and v == c.get(k))}
    return inline(w) if w is not None else cell(None)


def order_matrix_section(value: Any) -> str:
    intro = ('<p class="muted">Each cell compares applying the row sampler then the column sampler with the '
             "reverse order (so the matrix is symmetric). <b>=</b> the two orders gave the same result on "
             "every example drawn; <b>≠</b> a witness shows they differ (hover a cell, or see the table); "
             "<b>·</b> not tested. tvd = total variation distance between the two orders' output "
             "distributions on the witness.</p>")
    if not isinstance(value, dict) or not _cells(value):
        return f'<section id="order-matrix"><h3>Order matrix</h3>{generic(value)}</section>'
    cells = _cells(value)
    samplers = [str(s) for s in value.get("samplers") or []]
    for c in cells:  # samplers named only in the cells still get a row and a column
        for k in ("first", "second"):
            if str(c.get(k)) not in samplers:
                samplers.append(str(c.get(k)))
    by_pair = {(str(c.get("first")), str(c.get("second"))): c for c in cells}
    for (a, b), c in list(by_pair.items()):  # "A then B vs B then A" is symmetric: fill the mirror cell
        by_pair.setdefault((b, a), c)

    head = "".join(f'<th class="rot"><div>{esc(s)}</div></th>' for s in samplers)
    body = []
    for a in samplers:
        tds = []
        for b in samplers:
            c = by_pair.get((a, b))
            if a == b and c is None:
                tds.append('<td class="diag">—</td>')
                continue
            rel = str(c.get("relation", "untested")) if c else "untested"
            sym, cls = SYMBOL.get(rel, ("?", "other"))
            tip = f"{a} then {b} vs {b} then {a}: {rel}"
            if c and c.get("tvd") is not None:
                tip += f" (tvd {fmt_num(c.get('tvd'))})"
            if c and c.get("why"):
                tip += f"\nwhy: {c['why']}"
            if c and c.get("witness") is not None:
                tip += "\nwitness: " + truncate(compact_json(c["witness"]), 700)
            tds.append(f'<td class="{cls}" title="{esc(tip)}">{sym}</td>')
        body.append(f'<tr><th class="rowh">{esc(a)}</th>{"".join(tds)}</tr>')
    grid = f'<table class="matrix"><thead><tr><th></th>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'

    rels = [str(c.get("relation")) for c in cells]
    counts = ", ".join(f"{rels.count(r)} {r}" for r in sorted(set(rels)))
    witnessed = [c for c in cells if c.get("witness") is not None or c.get("relation") == "differs"]
    has_why = any(c.get("why") for c in witnessed)
    rows = "".join(
        f'<tr><td class="nw">{esc(c.get("first"))}</td><td class="nw">{esc(c.get("second"))}</td>'
        f'<td class="nw">{esc(c.get("relation"))}</td><td class="num">{esc(fmt_num(c.get("tvd")))}</td>'
        + (f'<td>{cell(c.get("why", ""))}</td>' if has_why else "")
        + f"<td>{_witness(c)}</td></tr>"
        for c in witnessed)
    why_head = "<th>why</th>" if has_why else ""
    wtable = ('<table class="grid"><thead><tr><th>first</th><th>then</th><th>relation</th><th>tvd</th>'
              f"{why_head}<th>witness</th></tr></thead><tbody>{rows}</tbody></table>" if witnessed
              else '<p class="muted">No pair differs, so there are no witnesses.</p>')
    return f"""<section id="order-matrix"><h3>Order matrix ({len(samplers)} samplers; {esc(counts)})</h3>{intro}
{grid}<h4>Witnesses</h4>{wtable}</section>"""
