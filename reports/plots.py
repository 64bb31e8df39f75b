"""Plots for the report, drawn with matplotlib's Agg canvas (no display, no pyplot global state)
and inlined as base64 PNG so the page stays one self-contained file."""
from __future__ import annotations

import base64
import io
import math
from typing import Any

from reports.tables import as_float, esc

# A ratio of 0 (exact agreement) has no place on a log axis: it is drawn at this floor and labelled.
RATIO_FLOOR = 1e-4
DTYPE_COLOURS = {"float32": "#3b6ea8", "float16": "#d08c2e", "bfloat16": "#6a9f48"}
OTHER_COLOUR = "#8a7cb8"


def _png(fig) -> str:
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    FigureCanvasAgg(fig)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=96, bbox_inches="tight", metadata={"Software": None})
    return base64.b64encode(buf.getvalue()).decode("ascii")


def worst_ratio_by_record(worst_error: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """{record: {dtype: the largest err/bound over its properties}} (NaN beats everything: it is a bug)."""
    out: dict[str, dict[str, float]] = {}
    for row in worst_error:
        if not isinstance(row, dict) or "record" not in row:
            continue
        rec, dt = str(row["record"]), str(row.get("dtype", "?"))
        r = as_float(row.get("ratio"))
        prev = out.setdefault(rec, {}).get(dt)
        if prev is None or math.isnan(r) or (not math.isnan(prev) and r > prev):
            out[rec][dt] = r
    return out


def ratio_plot(worst_error: list[dict[str, Any]]) -> str:
    """HTML for the worst err/bound bar plot (log x), one group of bars per record, one bar per dtype."""
    data = worst_ratio_by_record(worst_error)
    if not data:
        return '<p class="muted">No error measurements were recorded, so there is nothing to plot.</p>'
    try:
        from matplotlib.figure import Figure
        from matplotlib.patches import Patch
    except ImportError:
        return ('<p class="muted">matplotlib is not installed, so the plot is omitted '
                "(pip install 'logitcheck[report]'); the table above has the same numbers.</p>")

    records = sorted(data)
    dtypes = sorted({d for v in data.values() for d in v}, key=lambda d: (d not in DTYPE_COLOURS, d))
    finite = [r for v in data.values() for r in v.values() if math.isfinite(r) and r > 0]
    top = max([1.0] + finite) * 4  # where ∞ / NaN bars end; beyond every finite bar and the bound
    fig = Figure(figsize=(9, 0.34 * len(records) * max(1, len(dtypes)) ** 0.5 + 1.4))
    ax = fig.add_subplot()
    h = 0.8 / max(1, len(dtypes))
    for j, dt in enumerate(dtypes):
        ys, widths, colours, labels = [], [], [], []
        for i, rec in enumerate(records):
            if dt not in data[rec]:
                continue
            r = data[rec][dt]
            ys.append(i - 0.4 + h * (j + 0.5))
            bad = not math.isfinite(r) or r > 1.0
            # bars start at the floor, so the width is (end - floor); an exact 0 gets a visible stub
            widths.append((top if not math.isfinite(r) else max(r, 1.3 * RATIO_FLOOR)) - RATIO_FLOOR)
            colours.append("#c0392b" if bad else DTYPE_COLOURS.get(dt, OTHER_COLOUR))
            labels.append("NaN" if math.isnan(r) else "∞" if math.isinf(r) else ("0 (exact)" if r == 0 else f"{r:.2g}"))
        ax.barh(ys, widths, height=h * 0.9, left=RATIO_FLOOR, color=colours,
                label=dt, edgecolor="none")
        for y, w, lab in zip(ys, widths, labels):
            ax.text((w + RATIO_FLOOR) * 1.15, y, lab, va="center", fontsize=7, color="#333")
    ax.axvline(1.0, color="#c0392b", linestyle="--", linewidth=1)
    ax.text(1.0, -0.9, " model bound", color="#c0392b", fontsize=8, va="center")
    ax.set_xscale("log")
    ax.set_xlim(RATIO_FLOOR, top * 3)
    ax.set_yticks(range(len(records)), records, fontsize=8)
    ax.set_ylim(len(records) - 0.5, -1.3)
    ax.set_xlabel("worst error / model bound  (≤ 1 passes; red: bound exceeded, ∞ or NaN)")
    handles = [Patch(color=DTYPE_COLOURS.get(d, OTHER_COLOUR), label=d) for d in dtypes]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False,
              title="input dtype", title_fontsize=8)
    ax.grid(axis="x", which="major", color="#ddd", linewidth=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    alt = "Bar plot of the worst error/bound ratio per record and dtype: " + "; ".join(
        f"{rec}: " + ", ".join(f"{d}={data[rec][d]:.3g}" for d in sorted(data[rec])) for rec in records)
    return f'<img class="plot" alt="{esc(alt)}" src="data:image/png;base64,{_png(fig)}">'
