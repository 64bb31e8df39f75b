"""Per area, per (record, property, dtype): the distribution of every example's error against its
bound (inline SVG histogram of error / bound on a log axis, the bound at 1), its quantiles in u, and
the worst inputs with the case that produced them. Reads ``worst_error``'s histograms; a version 1
results.json (worst error only) is drawn as its single worst point."""
from __future__ import annotations

import math
from typing import Any

from properties.api import bin_key, quantile  # the writer's bins, read back
from reports.areas import BY_KEY, record_areas
from reports.sections import Context, section
from reports.tables import as_float, esc, fmt_num, truncate

LO, HI = -16, 4                 # axis: 10^(LO/4) = 1e-4 .. 10^(HI/4) = 10, quarter-decade bins
W, H, PAD = 220, 34, 14         # plot area and the side strips for "0" (left) and "> 10, ∞, NaN" (right)
MEASURING = ("samplers", "ops", "quants", "engines", "peers", "parity", "other")  # areas whose records are listed


def _bins(row: dict[str, Any]) -> dict[str, int]:
    hist = row.get("ratio_hist")
    if isinstance(hist, dict) and hist:
        return {str(k): int(as_float(v)) for k, v in hist.items() if as_float(v) > 0}
    return {bin_key(as_float(row.get("ratio"))): 1}  # version 1: only the worst example


def _slot(key: str) -> tuple[str, int]:
    """Where a bin is drawn: ('zero', 0), ('axis', column), or ('over', 0)."""
    if key == "zero":
        return "zero", 0
    if key in ("inf", "nan"):
        return "over", 0
    k = int(key)
    return ("over", 0) if k >= HI else ("axis", max(k, LO) - LO)


def histogram_svg(row: dict[str, Any]) -> str:
    """A small histogram of error / bound: grey at or under the bound, red past it."""
    bins = _bins(row)
    cols = HI - LO
    heights: dict[tuple[str, int], int] = {}
    for key, n in bins.items():
        slot = _slot(key)
        heights[slot] = heights.get(slot, 0) + n
    top = max(heights.values(), default=1)
    bw = W / cols
    x0 = PAD + 4
    parts = []
    for (where, col), n in sorted(heights.items()):
        h = max(1.5, (H - 4) * n / top)
        if where == "zero":
            x, w, colour = 1.0, PAD - 2, "#9aa5b4"
        elif where == "over":
            x, w, colour = x0 + W + 3, PAD - 2, "#c0392b"
        else:
            x, w = x0 + col * bw + 0.5, bw - 1
            colour = "#c0392b" if col >= -LO else "#5b7fb0"
        parts.append(f'<rect x="{x:.1f}" y="{H - h:.1f}" width="{w:.1f}" height="{h:.1f}" fill="{colour}"/>')
    bound_x = x0 - LO * bw
    ticks = "".join(f'<line x1="{x0 + (d * 4 - LO) * bw:.1f}" y1="{H}" x2="{x0 + (d * 4 - LO) * bw:.1f}" '
                    f'y2="{H + 3}" stroke="#99a"/>' for d in range(-4, 2))
    n_all = sum(bins.values())
    summary = (f"{n_all} examples; error / bound: " + ", ".join(
        f"{lab} {n}" for lab, n in (("exact", bins.get("zero", 0)),
                                    ("past the bound", sum(n for k, n in bins.items() if _slot(k)[0] == "over"
                                                           or (_slot(k)[0] == "axis" and _slot(k)[1] >= -LO))))))
    return (f'<svg class="hist" width="{x0 + W + PAD + 4}" height="{H + 12}" role="img" '
            f'viewBox="0 0 {x0 + W + PAD + 4} {H + 12}"><title>{esc(summary)}</title>'
            f'<line x1="{x0}" y1="{H + .5}" x2="{x0 + W}" y2="{H + .5}" stroke="#bbc"/>{ticks}{"".join(parts)}'
            f'<line x1="{bound_x:.1f}" y1="0" x2="{bound_x:.1f}" y2="{H + 4}" stroke="#c0392b" stroke-dasharray="3,2"/>'
            f'<text x="{x0}" y="{H + 11}" class="ax">1e-4</text><text x="{bound_x - 6:.1f}" y="{H + 11}" '
            f'class="ax">1</text><text x="2" y="{H + 11}" class="ax">0</text></svg>')


def _quantile_u(row: dict[str, Any], q: float) -> float | None:
    hist = row.get("u_hist")
    if not isinstance(hist, dict) or not hist:
        return None
    return quantile({str(k): int(as_float(v)) for k, v in hist.items()}, q)


def _worst_inputs(row: dict[str, Any]) -> str:
    cases = [c for c in row.get("worst_cases") or [] if isinstance(c, dict)]
    if not cases:
        return '<span class="muted">—</span>'
    items = "".join(
        f'<li><b>{esc(fmt_num(as_float(c.get("ratio"))))}×</b> ({esc(fmt_num(as_float(c.get("worst_u"))))} u of '
        f'{esc(fmt_num(as_float(c.get("bound_u"))))}) <code>{esc(truncate(str(c.get("case") or "?"), 300))}</code>'
        f'<div class="muted">{esc(c.get("test", ""))}</div></li>' for c in cases)
    first = cases[0]
    return (f'<details><summary><code>{esc(truncate(str(first.get("case") or "?"), 90))}</code></summary>'
            f'<ol class="cases">{items}</ol></details>')


def _ratios(r: dict[str, Any]) -> str:
    """p50 / p90 / worst as fractions of the bound; past the bound in red."""
    def one(x: Any) -> str:
        if x is None:
            return "—"
        v = as_float(x)
        return f'<span class="bad">{esc(fmt_num(v))}</span>' if not v <= 1.0 else esc(fmt_num(v))
    return " / ".join(one(r.get(k)) for k in ("ratio_p50", "ratio_p90", "ratio"))


def distribution_table(rows: list[dict[str, Any]]) -> str:
    rows = sorted(rows, key=lambda r: (-(math.inf if math.isnan(as_float(r.get("ratio"))) else as_float(r.get("ratio"))),
                                       str(r.get("record")), str(r.get("property")), str(r.get("dtype"))))
    body = []
    for r in rows:
        bad = not as_float(r.get("ratio")) <= 1.0
        u50, u90 = _quantile_u(r, 0.5), _quantile_u(r, 0.9)
        lo, hi = as_float(r.get("bound_u_min", r.get("bound_u"))), as_float(r.get("bound_u_max", r.get("bound_u")))
        bound = fmt_num(hi) if lo == hi or math.isnan(lo) else f"{fmt_num(lo)}–{fmt_num(hi)}"
        body.append(
            f'<tr{" class=bad" if bad else ""}><td class="nw">{esc(r.get("record"))}<div class="muted">'
            f'{esc(r.get("property"))} · {esc(r.get("dtype"))}</div></td><td class="num">{esc(fmt_num(r.get("n", 1)))}</td>'
            f'<td>{histogram_svg(r)}</td><td class="numw">{_ratios(r)}</td>'
            f'<td class="numw">{esc(fmt_num(u50)) if u50 is not None else "—"} / '
            f'{esc(fmt_num(u90)) if u90 is not None else "—"} / {esc(fmt_num(as_float(r.get("worst_u"))))}</td>'
            f'<td class="numw">{esc(bound)}</td><td class="wi">{_worst_inputs(r)}</td></tr>')
    return ('<table class="grid dist"><thead><tr><th>record<div class="muted">property · dtype</div></th>'
            "<th>examples</th><th>error / bound per example<div class=muted>log axis; dashed: the bound</div></th>"
            "<th>×bound<div class=muted>p50 / p90 / worst</div></th><th>error in u<div class=muted>p50 / p90 / max"
            "</div></th><th>bound (u)</th><th>worst inputs</th></tr></thead>"
            f'<tbody>{"".join(body)}</tbody></table>')


LEAD = ('<p class="muted">Each example\'s worst element, as a fraction of its own error model\'s bound (≤ 1 passes; '
        "the bound differs per example, growing with size and conditioning, so the fraction is the comparable "
        "number). Quantiles are upper edges of quarter-decade bins (within a factor 1.78); the worst is exact. "
        "Rows closest to their bound first; the worst inputs are replay recipes for the examples.</p>")


def _area_rows(ctx: Context, area: str) -> list[dict[str, Any]]:
    areas = record_areas(ctx.results)
    return [w for w in ctx.worst_error if areas.get(str(w.get("record")), "other") == area]


def _exact_records(ctx: Context, area: str) -> str:
    measured = {str(w.get("record")) for w in ctx.worst_error}
    areas = record_areas(ctx.results)
    counts: dict[str, int] = {}
    for e in ctx.results.get("examples") or []:
        rec = str(e.get("record")) if isinstance(e, dict) else ""
        if rec and rec not in measured and areas.get(rec, "other") == area:
            counts[rec] = counts.get(rec, 0) + int(as_float(e.get("count", 0)) or 0)
    if not counts:
        return ""
    items = ", ".join(f"{esc(r)} ×{n:,}" for r, n in sorted(counts.items()))
    return (f"<details><summary>{len(counts)} records checked by exact or set-valued properties only "
            f"({sum(counts.values()):,} examples)</summary><p>{items}</p></details>")


def _register(area: str) -> None:
    def has(ctx: Context) -> bool:
        return bool(_area_rows(ctx, area) or _exact_records(ctx, area))

    title = f"{BY_KEY[area].title}: records and error distributions"

    @section(f"dist-{area}", title, area=area, order=10, has_data=has,
             absent="No property of this area ran an example.")
    def draw(ctx: Context) -> str:
        rows = _area_rows(ctx, area)
        over = sum(1 for r in rows if not as_float(r.get("ratio")) <= 1.0)
        head = f"{len(rows)} record/property/dtype rows measured in u" + (f", {over} PAST THE BOUND" if over else "")
        table = f"{LEAD}{distribution_table(rows)}" if rows else \
            '<p class="muted">No property of this area measures an error in units of u.</p>'
        return (f'<section id="dist-{area}"><h3>{esc(title)} ({esc(head)})</h3>{table}'
                f"{_exact_records(ctx, area)}</section>")


for _key in MEASURING:
    _register(_key)
