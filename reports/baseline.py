"""What changed since a baseline results.json (the previous night's): new failures and fixes,
records whose error grew or shrank by more than a stated factor, zoo kill changes, coverage.

Errors are compared as error / bound (the worst example, and the p90 of the per-example
distribution when both runs recorded one). A ratio that moves by less than ``factor`` is not
listed: a nightly draws new examples each night, and its worst example moves with them. Ratios
below ``FLOOR`` on both sides are not listed either: an error under a thousandth of its bound is
far from failing whatever it does.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from reports.tables import as_float, esc, fmt_num
from reports.zoo import _killed, is_zoo, zoo_rows

DEFAULT_FACTOR = 2.0
FLOOR = 1e-3


@dataclass
class Changes:
    factor: float
    baseline: dict[str, Any]
    new_failures: list[str] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)
    still_failing: list[str] = field(default_factory=list)
    new_tests: list[str] = field(default_factory=list)
    gone_tests: list[str] = field(default_factory=list)
    regressions: list[dict[str, Any]] = field(default_factory=list)
    improvements: list[dict[str, Any]] = field(default_factory=list)
    kills: list[dict[str, Any]] = field(default_factory=list)
    coverage: list[str] = field(default_factory=list)

    @property
    def worse(self) -> int:
        return len(self.new_failures) + len(self.regressions) + sum(1 for k in self.kills if k["worse"])


def _outcomes(results: dict[str, Any]) -> dict[str, str]:
    return {str(t.get("nodeid")): str(t.get("outcome")) for t in results.get("tests") or [] if isinstance(t, dict)}


def _errors(results: dict[str, Any]) -> dict[tuple[str, str, str], dict[str, Any]]:
    return {(str(w.get("record")), str(w.get("property")), str(w.get("dtype"))): w
            for w in results.get("worst_error") or [] if isinstance(w, dict)}


def _moved(old: float, new: float, factor: float) -> int:
    """+1 grew past factor, -1 shrank past it, 0 neither (NaN counts as infinitely large)."""
    old, new = (math.inf if math.isnan(x) else x for x in (old, new))
    if max(old, new) < FLOOR or old == new:
        return 0
    if new > max(old, FLOOR) * factor or (math.isinf(new) and not math.isinf(old)):
        return 1
    if old > max(new, FLOOR) * factor or (math.isinf(old) and not math.isinf(new)):
        return -1
    return 0


def _zoo_kills(results: dict[str, Any]) -> dict[tuple[str, str], dict[str, Any]]:
    out = {}
    tables = results.get("tables") if isinstance(results.get("tables"), dict) else {}
    for name, value in tables.items():
        for row in (zoo_rows(value) or []) if is_zoo(name) else []:
            out[(name, str(row.get("mutant")))] = row
    return out


def compare(old: dict[str, Any], new: dict[str, Any], factor: float = DEFAULT_FACTOR) -> Changes:
    ch = Changes(factor, old)
    before, now = _outcomes(old), _outcomes(new)
    for node, outcome in sorted(now.items()):
        was = before.get(node)
        if outcome in ("failed", "error"):
            (ch.still_failing if was in ("failed", "error") else ch.new_failures).append(node)
        elif was in ("failed", "error") and outcome == "passed":
            ch.fixed.append(node)
        if was is None:
            ch.new_tests.append(node)
    ch.gone_tests = sorted(set(before) - set(now))
    e_old, e_new = _errors(old), _errors(new)
    for key in sorted(set(e_old) & set(e_new)):
        a, b = e_old[key], e_new[key]
        moves = {"worst": _moved(as_float(a.get("ratio")), as_float(b.get("ratio")), factor)}
        if a.get("ratio_p90") is not None and b.get("ratio_p90") is not None:
            moves["p90"] = _moved(as_float(a["ratio_p90"]), as_float(b["ratio_p90"]), factor)
        row = {"record": key[0], "property": key[1], "dtype": key[2], "old": a, "new": b,
               "which": [k for k, m in moves.items() if m]}
        if any(m > 0 for m in moves.values()):
            ch.regressions.append(row)
        elif any(m < 0 for m in moves.values()):
            ch.improvements.append(row)
    k_old, k_new = _zoo_kills(old), _zoo_kills(new)
    for key in sorted(set(k_old) | set(k_new)):
        a, b = k_old.get(key), k_new.get(key)
        ka, kb = (_killed(r) if r else None for r in (a, b))
        ea, eb = (r.get("examples_to_kill") if r else None for r in (a, b))
        if ka != kb or (isinstance(ea, int) and isinstance(eb, int) and _moved(ea, eb, factor)):
            ch.kills.append({"zoo": key[0], "mutant": key[1], "was": ka, "now": kb, "examples_was": ea,
                             "examples_now": eb, "worse": (ka is True and kb is not True)
                             or (ka == kb is True and _moved(ea, eb, factor) > 0)})
    nc_old = set((old.get("meta") or {}).get("not_covered") or [])
    nc_new = set((new.get("meta") or {}).get("not_covered") or [])
    ch.coverage = [f"now NOT COVERED: {n}" for n in sorted(nc_new - nc_old)] + \
                  [f"now covered: {n}" for n in sorted(nc_old - nc_new)]
    return ch


def summary_line(ch: Changes) -> str:
    """One line for the first screen."""
    meta = ch.baseline.get("meta") or {}
    parts = [f"{len(ch.new_failures)} new failure(s)", f"{len(ch.regressions)} error regression(s)",
             f"{len(ch.fixed)} fixed", f"{len(ch.improvements)} improvement(s)"]
    if ch.kills:
        parts.append(f"{len(ch.kills)} zoo change(s)")
    cls = "bad" if ch.worse else "ok"
    return (f'<p class="changes {cls}"><a href="#changes">Since the baseline</a> ({esc(meta.get("date", "undated"))}, '
            f'profile {esc(meta.get("profile", "?"))}): {esc(", ".join(parts))}.</p>')


def _nodes(title: str, nodes: list[str], cls: str = "") -> str:
    if not nodes:
        return ""
    items = "".join(f"<li><code>{esc(n)}</code></li>" for n in nodes[:200])
    more = f"<li>… and {len(nodes) - 200} more</li>" if len(nodes) > 200 else ""
    return f'<h4 class="{cls}">{esc(title)} ({len(nodes)})</h4><ul>{items}{more}</ul>'


def _error_rows(title: str, rows: list[dict[str, Any]], cls: str) -> str:
    if not rows:
        return ""
    def r(w: dict[str, Any], k: str) -> str:
        return esc(fmt_num(as_float(w.get(k)))) if w.get(k) is not None else "—"
    body = "".join(
        f'<tr><td class="nw">{esc(x["record"])}</td><td>{esc(x["property"])}</td><td class="nw">{esc(x["dtype"])}</td>'
        f'<td class="num">{r(x["old"], "ratio")} → <b>{r(x["new"], "ratio")}</b></td>'
        f'<td class="num">{r(x["old"], "ratio_p90")} → <b>{r(x["new"], "ratio_p90")}</b></td>'
        f'<td>{esc(", ".join(x["which"]))}</td></tr>' for x in rows)
    return (f'<h4 class="{cls}">{esc(title)} ({len(rows)})</h4><table class="grid"><thead><tr><th>record</th>'
            "<th>property</th><th>dtype</th><th>worst ×bound</th><th>p90 ×bound</th><th>moved</th></tr></thead>"
            f"<tbody>{body}</tbody></table>")


def changes_section(ch: Changes) -> str:
    kills = "".join(
        f'<tr class="{"bad" if k["worse"] else ""}"><td>{esc(k["zoo"])}</td><td><code>{esc(k["mutant"])}</code></td>'
        f'<td>{esc({True: "killed", False: "SURVIVED", None: "—"}[k["was"]])} → '
        f'{esc({True: "killed", False: "SURVIVED", None: "—"}[k["now"]])}</td>'
        f'<td class="num">{esc(fmt_num(k["examples_was"]))} → {esc(fmt_num(k["examples_now"]))}</td></tr>'
        for k in ch.kills)
    kill_html = (f'<h4>Zoo kill changes ({len(ch.kills)})</h4><table class="grid"><thead><tr><th>zoo</th><th>mutant'
                 f"</th><th>verdict</th><th>examples to kill</th></tr></thead><tbody>{kills}</tbody></table>"
                 if kills else "")
    body = (_nodes("New failures", ch.new_failures, "bad") + _error_rows("Error regressions", ch.regressions, "bad")
            + kill_html + _nodes("Fixed", ch.fixed, "ok") + _error_rows("Improvements", ch.improvements, "ok")
            + _nodes("Still failing", ch.still_failing) + _nodes("Coverage", ch.coverage)
            + (f"<details><summary>{len(ch.new_tests)} new and {len(ch.gone_tests)} removed tests</summary>"
               + _nodes("New tests", ch.new_tests) + _nodes("Removed tests", ch.gone_tests) + "</details>"
               if ch.new_tests or ch.gone_tests else ""))
    lead = (f'<p class="muted">Against the baseline run of {esc((ch.baseline.get("meta") or {}).get("date", "?"))}. '
            f"An error is listed when its error / bound (worst example, or p90 of the examples) moved by more than "
            f"×{fmt_num(ch.factor)} and is at least {FLOOR:g} of the bound on one side.</p>")
    return (f'<section id="changes"><h2>Changes since the baseline</h2>{lead}'
            f'{body or "<p>Nothing changed beyond the stated factor.</p>"}</section>')
