"""The report's drift-versus-bug section, from the tables the drift tests record:

* ``drift_vs_bug_correct`` = {variant: row}: a correct engine (gpu_impl in float32, and in
  float16) on each drift model (fixtures/drift_model: gemma2- and gemma4-layout, RMSNorm weights
  of rms 40 and max 300, 8 layers): how far its final logits moved (cosine, same top-1, KLD) next to the verdict, which
  must be "within" at every tensor;
* ``drift_vs_bug_mutants`` = {"<mutant> on <fixture>": row}: each structural bug of the Gemma
  port's list, with the first tensor past its bound and by how much;
* ``drift_vs_bug_half_precision`` = {"<mutant> on <fixture> <precision>": row}: the same bugs in the
  float16 and bfloat16 engines, judged by the float64 bound and the precision-matched reference;
* ``drift_vs_bug_precision`` = {engine: {precision: ratio, "explained by": line}}: which storage
  precision's matched reference explains each correct engine (shown as it is).

Each row: final cosine (mean, min), same top-1, top-5 overlap, mean KLD, cosine misleading,
verdict ("within" / "structural"), tensor (the first past its bound, or the closest to it), x bound,
line (the verdict as ``logitcheck layers`` prints it). Nothing is recomputed here.
"""
from __future__ import annotations

from typing import Any

from reports.sections import Context, section
from reports.tables import as_float, esc, fmt_num, generic

LEAD = ("A correct engine may drift far at the logits on a model whose norm weights amplify its rounding, "
        "and still be within its error model at every tensor; a structural bug is past its bound at the "
        "tensor where it enters. The verdict is what `logitcheck layers --error-model` prints.")
COLUMNS = ("final cosine (mean)", "final cosine (min)", "same top-1", "mean KLD", "cosine misleading", "verdict",
           "tensor", "x bound")


def _cell(column: str, value: Any) -> str:
    if column == "verdict":
        cls = "bad" if value == "structural" else ("ok" if value == "within" else "muted")
        return f'<td class="{cls}">{esc(value if value is not None else "?")}</td>'
    if column == "tensor":
        return f'<td class="nw">{esc(value if value is not None else "")}</td>'
    shown = fmt_num(value) if isinstance(value, bool) else fmt_num(as_float(value))
    return f'<td class="num">{esc(shown)}</td>'


def _rows(table: dict[str, Any], first: str) -> str:
    body = []
    for name in sorted(table):
        r = table[name] if isinstance(table[name], dict) else {}
        cells = "".join(_cell(c, r.get(c)) for c in COLUMNS)
        body.append(f'<tr><td class="nw">{esc(name)}</td>{cells}</tr>')
    head = "".join(f"<th>{esc(c)}</th>" for c in (first, *COLUMNS))
    return f'<table class="grid"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def drift_section(tables: dict[str, Any]) -> str:
    parts = ['<section id="drift-vs-bug"><h3>Drift or bug</h3>', f'<p class="lead">{esc(LEAD)}</p>']
    for key, title, first in (("drift_vs_bug_correct", "Correct engines on the drift model", "engine"),
                              ("drift_vs_bug_mutants", "The Gemma port's structural bugs", "mutant on fixture"),
                              ("drift_vs_bug_half_precision", "The same bugs in float16 and bfloat16 engines "
                               "(float64 bound and precision-matched reference)", "mutant on fixture, precision")):
        value = tables.get(key)
        if isinstance(value, dict) and value:
            parts += [f"<h4>{esc(title)}</h4>", _rows(value, first)]
        elif value is not None:
            parts.append(generic(value))
    if tables.get("drift_vs_bug_precision") is not None:
        parts += ["<h4>Which storage precision explains each correct engine</h4>",
                  generic(tables["drift_vs_bug_precision"])]
    return "".join(parts) + "</section>"


@section("drift-vs-bug", "Drift or bug", area="parity", order=25, tables=("drift_vs_bug_*",))
def _drift(ctx: Context) -> str:
    return drift_section(ctx.tables)
