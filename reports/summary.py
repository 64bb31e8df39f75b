"""The page's top: run identity, totals and verdict, NOT COVERED, failures; and the test list."""
from __future__ import annotations

import math
from collections import Counter
from typing import Any

from reports.tables import as_float, esc, fmt_num, kv_table, truncate

FAILURE_CHARS = 2000  # the plugin already cuts tracebacks to this; the renderer enforces it again
PYTEST_EXIT = {0: "all tests passed", 1: "some tests failed", 2: "interrupted", 3: "internal error",
               4: "usage error", 5: "no tests collected"}


def tally(tests: list[dict[str, Any]]) -> Counter:
    return Counter(str(t.get("outcome", "unknown")) for t in tests if isinstance(t, dict))


def over_bound(worst_error: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Measurements whose err/bound exceeds 1 (or is NaN: a NaN error is never within a model)."""
    out = []
    for row in worst_error:
        r = as_float(row.get("ratio")) if isinstance(row, dict) else math.nan
        if isinstance(row, dict) and (math.isnan(r) or r > 1.0):
            out.append(row)
    return out


def not_covered(meta: dict[str, Any], tests: list[dict[str, Any]]) -> list[str]:
    names = [str(n) for n in meta.get("not_covered") or []]
    if not names:  # older results: recover the names from the skip reasons
        names = sorted({str(t.get("reason", "")).split("NOT COVERED:", 1)[1].strip()
                        for t in tests if "NOT COVERED:" in str(t.get("reason", ""))})
    return names


def header(results: dict[str, Any]) -> str:
    meta = results.get("meta") or {}
    tests = results.get("tests") or []
    counts = tally(tests)
    failed, passed, skipped = counts.get("failed", 0), counts.get("passed", 0), counts.get("skipped", 0)
    exceeded = over_bound(results.get("worst_error") or [])
    if failed:
        verdict, cls = f"{failed} test{'s' if failed != 1 else ''} FAILED", "verdict bad"
    elif not passed:
        verdict, cls = "No test passed: nothing was verified", "verdict warn"
    else:
        verdict, cls = "All selected tests passed", "verdict ok"
    notes = []
    if exceeded:
        notes.append(f"{len(exceeded)} measurement(s) exceed their error model (ratio &gt; 1 or NaN): "
                     "see the table below.")
    code = meta.get("pytest_exit")
    if isinstance(code, int) and code not in (0, 1):
        notes.append(f"pytest exited with code {code} ({esc(PYTEST_EXIT.get(code, 'unknown'))}); "
                     "the results may be incomplete.")
    if meta.get("error"):
        notes.append(esc(truncate(str(meta["error"]), 600)))
    if meta.get("seed_effective") is False:
        notes.append(f"Profile {esc(meta.get('profile'))} is derandomized: the examples are fixed per test "
                     "and --seed had no effect.")
    totals = (f'<span class="pill ok">{passed} passed</span> <span class="pill bad">{failed} failed</span> '
              f'<span class="pill skip">{skipped} skipped</span>')
    others = {k: v for k, v in counts.items() if k not in ("passed", "failed", "skipped")}
    totals += "".join(f' <span class="pill">{v} {esc(k)}</span>' for k, v in others.items())

    ident = {k: meta.get(k) for k in ("impl", "backend", "profile", "seed", "selection", "date", "duration_s")
             if meta.get(k) not in (None, "")}
    versions = meta.get("versions") if isinstance(meta.get("versions"), dict) else {}
    if not versions:
        versions = {k: meta[k] for k in ("numpy", "cupy", "python", "hypothesis", "pytest") if k in meta}
    shown = set(ident) | {"versions", "not_covered", "pytest_exit", "error", "seed_effective"} | set(versions)
    rest = {k: v for k, v in meta.items() if k not in shown}
    nc = not_covered(meta, tests)
    nc_html = ("<p>Every function the selected tests asked for exists in the implementation.</p>" if not nc else
               "<p>The implementation lacks these, so their properties were <b>skipped, not passed</b>:</p><ul>"
               + "".join(f"<li><code>{esc(n)}</code></li>" for n in nc) + "</ul>")
    return f"""
<header>
 <h1>logitcheck report: <code>{esc(meta.get('impl', '?'))}</code> on {esc(meta.get('backend', '?'))}</h1>
 <div class="{cls}">{verdict}</div>
 <p class="totals">{totals}</p>
 {''.join(f'<p class="note">{n}</p>' for n in notes)}
 <div class="cols">
  <div><h3>Run</h3>{kv_table(ident)}</div>
  <div><h3>Versions</h3>{kv_table(versions) if versions else '<p class="muted">not recorded</p>'}</div>
  {f'<div><h3>Other run facts</h3>{kv_table(rest)}</div>' if rest else ''}
 </div>
 <section id="not-covered" class="{'warnbox' if nc else ''}"><h3>NOT COVERED ({len(nc)})</h3>{nc_html}</section>
</header>"""


def failures(results: dict[str, Any]) -> str:
    bad = [t for t in results.get("tests") or [] if isinstance(t, dict) and t.get("outcome") == "failed"]
    if not bad:
        return ""
    items = []
    for i, t in enumerate(bad):  # the plugin puts pytest's crash line (file:line: exception) first
        first, _, rest = truncate(str(t.get("reason") or "(no message recorded)"), FAILURE_CHARS).partition("\n")
        opened = " open" if i < 3 else ""  # the first few tracebacks (with hypothesis' witness) unfolded
        trace = (f'<details{opened}><summary>traceback</summary><pre class="trace">{esc(rest.strip())}</pre>'
                 "</details>" if rest.strip() else "")
        items.append(f'<li><code class="nodeid">{esc(t.get("nodeid", "?"))}</code>'
                     f'<p class="crash">{esc(first)}</p>{trace}</li>')
    items = "".join(items)
    return f'<section id="failures" class="failbox"><h2>Failures ({len(bad)})</h2><ol>{items}</ol></section>'


def test_list(results: dict[str, Any]) -> str:
    tests = [t for t in results.get("tests") or [] if isinstance(t, dict)]
    if not tests:
        return '<section id="tests"><h2>Tests</h2><p class="muted">No test outcomes were recorded.</p></section>'
    reasons = Counter(str(t.get("reason") or "(no reason)") for t in tests if t.get("outcome") == "skipped")
    skip_rows = "".join(f"<tr><td>{n}</td><td>{esc(truncate(r, 400))}</td></tr>" for r, n in reasons.most_common())
    skips = (f'<h3>Skip reasons</h3><table class="grid"><thead><tr><th>tests</th><th>reason</th></tr></thead>'
             f"<tbody>{skip_rows}</tbody></table>" if reasons else "")
    order = {"failed": 0, "skipped": 2, "passed": 1}
    rows = "".join(
        f'<tr class="{esc(t.get("outcome", ""))}"><td><code>{esc(t.get("nodeid", "?"))}</code></td>'
        f'<td>{esc(t.get("outcome", "?"))}</td><td class="num">{esc(fmt_num(t.get("duration")))}</td></tr>'
        for t in sorted(tests, key=lambda t: (order.get(t.get("outcome"), 3), str(t.get("nodeid")))))
    total = sum(as_float(t.get("duration")) for t in tests if math.isfinite(as_float(t.get("duration"))))
    return f"""<section id="tests"><h2>Tests ({len(tests)}, {total:.1f} s in test bodies)</h2>{skips}
<details><summary>Every test outcome</summary><table class="grid"><thead><tr><th>node id</th><th>outcome</th>
<th>seconds</th></tr></thead><tbody>{rows}</tbody></table></details></section>"""

