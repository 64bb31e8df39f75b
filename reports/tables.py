"""HTML building blocks: escaping, number formatting and the generic table renderer.

Everything that reaches the page from results.json passes through ``esc`` (text and attribute
values alike), so a witness holding ``<script>`` or quotes renders as text, never as markup.
"""
from __future__ import annotations

import html
import json
import math
from typing import Any, Iterable, Sequence

MAX_ROWS = 400        # longer tables are cut, and the cut is stated
MAX_CELL_CHARS = 600  # one cell never floods the page; the full value stays in results.json
MAX_DEPTH = 3         # nested values deeper than this are shown as compact JSON


def esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def truncate(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f" [… {len(text) - limit} more characters]"


def fmt_num(x: Any) -> str:
    """Numbers as a reader wants them: 3 significant digits, NaN/∞ spelled out."""
    if isinstance(x, bool) or x is None:
        return "—" if x is None else ("yes" if x else "no")
    if isinstance(x, int):
        return f"{x:,}" if abs(x) >= 10_000 else str(x)
    if isinstance(x, float):
        if math.isnan(x):
            return "NaN"
        if math.isinf(x):
            return "∞" if x > 0 else "−∞"
        return f"{x:.3g}"
    return str(x)


def as_float(x: Any) -> float:
    """A JSON number (or the strings json writes for non-finite ones) as float; NaN otherwise."""
    if isinstance(x, bool):
        return float(x)
    if isinstance(x, (int, float)):
        return float(x)
    if isinstance(x, str):
        try:
            return float(x)
        except ValueError:
            return math.nan
    return math.nan


def compact_json(value: Any) -> str:
    try:
        return json.dumps(value, sort_keys=True, default=str, allow_nan=True)
    except (TypeError, ValueError):
        return repr(value)


def cell(value: Any, depth: int = 0) -> str:
    """One value as HTML: scalars formatted, nested lists/dicts as nested tables (to a depth)."""
    if isinstance(value, bool):
        return '<span class="ok">✔</span>' if value else '<span class="bad">✘</span>'
    if value is None or isinstance(value, (int, float)):
        return esc(fmt_num(value))
    if isinstance(value, str):
        text = esc(truncate(value, MAX_CELL_CHARS))
        return f'<span class="long">{text}</span>' if len(value) > 160 else text
    if depth >= MAX_DEPTH:
        return f"<code>{esc(truncate(compact_json(value), MAX_CELL_CHARS))}</code>"
    if isinstance(value, dict):
        rows = keyed_rows(value)
        return records_table(rows, preferred=["key"], depth=depth + 1) if rows else kv_table(value, depth + 1)
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(v, dict) for v in value):
            return records_table(value, depth=depth + 1)
        if all(not isinstance(v, (dict, list, tuple)) for v in value):
            shown = ", ".join(fmt_num(v) if not isinstance(v, str) else v for v in value[:64])
            more = f" … ({len(value)} items)" if len(value) > 64 else ""
            return esc(truncate(f"[{shown}{more}]", MAX_CELL_CHARS))
        return "<ol>" + "".join(f"<li>{cell(v, depth + 1)}</li>" for v in value[:64]) + "</ol>"
    return esc(truncate(repr(value), MAX_CELL_CHARS))


def inline(value: Any, limit: int = MAX_CELL_CHARS) -> str:
    """A nested value as one escaped line, ``key: value; …`` (for witnesses, where tables get tall)."""
    def text(v: Any) -> str:
        if isinstance(v, dict):
            return "{" + ", ".join(f"{k}: {text(x)}" for k, x in v.items()) + "}"
        if isinstance(v, (list, tuple)):
            return "[" + ", ".join(text(x) for x in v) + "]"
        return v if isinstance(v, str) else fmt_num(v)
    if isinstance(value, dict):
        body = "; ".join(f"<b>{esc(k)}</b> {esc(truncate(text(v), limit))}" for k, v in value.items())
        return f'<span class="inline">{body}</span>'
    return f'<span class="inline">{esc(truncate(text(value), limit))}</span>'


def td_class(value: Any) -> str:
    """Numbers and short single words never wrap; everything else may wrap anywhere."""
    if value is None or isinstance(value, (bool, int, float)):
        return ' class="num"'
    if isinstance(value, str) and len(value) <= 28 and " " not in value:
        return ' class="nw"'
    return ""


def columns_of(rows: Iterable[dict], preferred: Sequence[str] = ()) -> list[str]:
    """Preferred columns first (if any row has them), then the rest in first-seen order."""
    seen: dict[str, None] = {}
    for r in rows:
        for k in r:
            seen.setdefault(str(k), None)
    return [c for c in preferred if c in seen] + [c for c in seen if c not in preferred]


def records_table(rows: Sequence[dict], preferred: Sequence[str] = (), depth: int = 0,
                  row_class=None, caption: str = "", columns: Sequence[str] | None = None) -> str:
    """A list of dicts as a table: ``columns`` exactly, or ``preferred`` first and then the rest.
    ``row_class(row)`` may return a CSS class for a row."""
    rows = [r for r in rows if isinstance(r, dict)]
    if not rows:
        return '<p class="muted">(empty)</p>'
    cols = list(columns) if columns is not None else columns_of(rows, preferred)
    head = "".join(f"<th>{esc(c)}</th>" for c in cols)
    body = []
    for r in rows[:MAX_ROWS]:
        cls = row_class(r) if row_class else ""
        attr = f' class="{esc(cls)}"' if cls else ""
        body.append(f"<tr{attr}>" + "".join(f"<td{td_class(r.get(c, ''))}>{cell(r.get(c, ''), depth)}</td>"
                                            for c in cols) + "</tr>")
    cut = (f'<p class="muted">Showing {MAX_ROWS} of {len(rows)} rows; the rest are in results.json.</p>'
           if len(rows) > MAX_ROWS else "")
    cap = f"<caption>{esc(caption)}</caption>" if caption else ""
    return f'<table class="grid">{cap}<thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>{cut}'


def kv_table(d: dict, depth: int = 0) -> str:
    if not d:
        return '<p class="muted">(empty)</p>'
    rows = "".join(f"<tr><th>{esc(k)}</th><td>{cell(v, depth)}</td></tr>" for k, v in list(d.items())[:MAX_ROWS])
    return f'<table class="kv">{rows}</table>'


def keyed_rows(d: dict) -> list[dict] | None:
    """``{key: {col: scalar}}`` (several keys) as rows with a leading "key" column, else None."""
    if len(d) < 2 or not all(isinstance(v, dict) and v for v in d.values()):
        return None
    def flat(x: Any) -> bool:  # a scalar, or a list of scalars
        if isinstance(x, dict):
            return False
        return not isinstance(x, (list, tuple)) or all(not isinstance(y, (dict, list, tuple)) for y in x)
    if not all(flat(x) for v in d.values() for x in v.values()):
        return None
    return [{"key": k, **v} for k, v in d.items()]


def generic(value: Any) -> str:
    """Any table value, whatever its shape: list of dicts or dict of flat dicts → table,
    dict → key/value, else text."""
    if isinstance(value, dict):
        rows = keyed_rows(value)
        return records_table(rows, preferred=["key"]) if rows else kv_table(value)
    if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
        return records_table(value)
    if isinstance(value, list) and not value:
        return '<p class="muted">(empty)</p>'
    return f"<div>{cell(value)}</div>"


def runs(values: Any, ranges: bool = False, limit: int = 400) -> str:
    """A list as short text: equal neighbours as ``v×n``; with ``ranges``, ascending integer runs
    as ``a–b`` (token sets). Witness rows are often 40 equal logits: this keeps them one line."""
    if not isinstance(values, (list, tuple)):
        return fmt_num(values) if not isinstance(values, str) else values
    if not values:
        return "[]"
    def num(v: Any) -> str:
        return v if isinstance(v, str) else (f"{v:.4g}" if isinstance(v, float) and math.isfinite(v) else fmt_num(v))
    parts, i = [], 0
    while i < len(values):
        j = i
        if ranges and isinstance(values[i], int) and not isinstance(values[i], bool):
            while j + 1 < len(values) and values[j + 1] == values[j] + 1 and isinstance(values[j + 1], int):
                j += 1
            parts.append(num(values[i]) if j == i else f"{num(values[i])}{'–' if j > i + 1 else ', '}{num(values[j])}")
        else:
            while j + 1 < len(values) and values[j + 1] == values[i] and not isinstance(values[i], (dict, list)):
                j += 1
            parts.append(num(values[i]) + (f"×{j - i + 1}" if j > i else ""))
        i = j + 1
    return truncate("[" + ", ".join(parts) + "]", limit)
