"""Is the judge right both ways? The report's sections for the calibration measurements:

- the conforming zoo's false alarms per (member, record): correct engines, so any failure is the
  judge's (table ``calibration_conforming``, from ``properties/zoo/test_calibration_zoos.py``);
- the near-threshold zoo's kills with examples-to-kill (``calibration_near``);
- the robustness grade: inputs outside an op's default-contract domain, judged by the strict
  contract only (``robustness`` rows of section "outside the domain");
- the bad-input grade: refusing NaN / +inf / wrong dtypes, its own pass rate (``robustness``
  rows of section "bad input").
The two grades are never failures of an implementation's numerics on valid input.
"""
from __future__ import annotations

from typing import Any

from reports.sections import Context, section
from reports.tables import esc, records_table

CONFORMING_COLUMNS = ("member", "record", "properties", "examples", "false_alarms", "first")
NEAR_COLUMNS = ("mutant", "domain", "size", "killed", "examples_to_kill", "examples_run", "killed_by",
                "control_fails_too", "why")
GRADE_COLUMNS = ("subject", "checked", "held", "pass_rate", "first_miss")


def _rows(value: Any) -> list[dict[str, Any]]:
    return [r for r in value if isinstance(r, dict)] if isinstance(value, list) else []


def _int(x: Any) -> int:
    return x if isinstance(x, int) and not isinstance(x, bool) else 0


@section("calibration-conforming", "Conforming engines: false alarms", area="zoo", order=30,
         tables=("calibration_conforming",))
def conforming_section(ctx: Context) -> str:
    rows = _rows(ctx.tables["calibration_conforming"])
    alarms = sum(_int(r.get("false_alarms")) for r in rows)
    members = sorted({str(r.get("member")) for r in rows})
    head = f"{alarms} false alarm(s) over {len(rows)} (member, record) pairs, {len(members)} member(s)"
    table = records_table(rows, columns=CONFORMING_COLUMNS,
                          row_class=lambda r: "bad" if _int(r.get("false_alarms")) else "")
    return (f'<section id="calibration-conforming"><h3>Conforming engines: {esc(head)}</h3>'
            '<p class="muted">Correct engines written the way engines write them (llama.cpp CPU loops, CUDA '
            "block trees, online softmax, PyTorch, Kahan, float64 accumulation), judged by every property "
            "that calls a function they replace, under the run's contract: each failing property is a false "
            f"alarm of the judge (goal 0).</p>{table}</section>")


@section("calibration-near", "Near-threshold mutants: kills", area="zoo", order=31, tables=("calibration_near",))
def near_section(ctx: Context) -> str:
    rows = _rows(ctx.tables["calibration_near"])
    killed = sum(r.get("killed") is True for r in rows)
    rate = f"{100 * killed / len(rows):.0f} %" if rows else "-"
    steps = sorted(_int(r.get("examples_to_kill")) for r in rows if r.get("killed") is True)
    median = steps[len(steps) // 2] if steps else "-"
    survivors = [str(r.get("mutant")) for r in rows if r.get("killed") is not True]
    note = ('<p class="note bad">Survived (a bug the judge cannot see): '
            + ", ".join(f"<code>{esc(s)}</code>" for s in survivors) + ".</p>") if survivors else ""
    table = records_table(rows, columns=NEAR_COLUMNS, row_class=lambda r: "" if r.get("killed") is True else "bad")
    return (f'<section id="calibration-near"><h3>Near-threshold mutants: {killed} of {len(rows)} killed '
            f"({esc(rate)}); median examples-to-kill {esc(median)}</h3>"
            '<p class="muted">Bugs of a few to a few hundred u (size column). examples_to_kill counts every '
            "example run, corners first, up to the first failing one; each kill is replayed on the unmutated "
            f"implementation, and a kill it shares is not counted (control_fails_too).</p>{note}{table}</section>")


def _grade(ctx: Context, which: str) -> list[dict[str, Any]]:
    return [r for r in _rows(ctx.tables.get("robustness")) if r.get("section") == which]


def _grade_section(anchor: str, title: str, rows: list[dict[str, Any]], intro: str) -> str:
    checked = sum(_int(r.get("checked")) for r in rows)
    held = sum(_int(r.get("held")) for r in rows)
    rate = f"{100 * held / checked:.1f} %" if checked else "-"
    table = records_table(rows, columns=GRADE_COLUMNS, row_class=lambda r: "" if r.get("held") == r.get("checked") else "warn")
    return (f'<section id="{anchor}"><h3>{esc(title)}: {held} of {checked} held ({esc(rate)})</h3>'
            f'<p class="muted">{esc(intro)}</p>{table}</section>')


@section("grade-domain", "Robustness grade: outside the default domain", area="judge", order=40,
         tables=("robustness",), has_data=lambda ctx: bool(_grade(ctx, "outside the domain")),
         absent="No op saw an input outside its default-contract domain in this run.")
def domain_section(ctx: Context) -> str:
    return _grade_section("grade-domain", "Robustness grade: outside the default domain",
                          _grade(ctx, "outside the domain"),
                          "Inputs outside what real engines guarantee (e.g. rows whose squares overflow float32 in a "
                          "norm): judged by the strict contract only. A miss here is a robustness grade, not a wrong "
                          "answer, unless the implementation claims overflow safety.")


@section("grade-bad-input", "Bad-input grade", area="judge", order=41, tables=("robustness",),
         has_data=lambda ctx: bool(_grade(ctx, "bad input")),
         absent="No bad-input test ran in this run.")
def bad_input_section(ctx: Context) -> str:
    return _grade_section("grade-bad-input", "Bad-input grade", _grade(ctx, "bad input"),
                          "NaN / +inf logits, wrong dtypes, empty rows: refused with a ValueError (what the strict "
                          "contract asks), or answered. Graded on its own pass rate; a failure of the numerics only "
                          "where the implementation claims refuses_bad_input or the contract is strict.")
