"""The page's first screen: overall verdict, a verdict per area, the failures (property, shrunk
case, error in u against its bound, the command that reproduces it), the environment; and, at the
end of the page, NOT COVERED and every test outcome."""
from __future__ import annotations

import math
import shlex
from collections import Counter
from typing import Any

from reports.areas import AREAS, BY_KEY, Verdict, area_of
from reports.tables import as_float, esc, fmt_num, truncate

FAILURE_CHARS = 2000  # the plugin already cuts tracebacks to this; the renderer enforces it again
OPEN_FAILURES = 3     # tracebacks unfolded on the first screen; the rest fold
PYTEST_EXIT = {0: "all tests passed", 1: "some tests failed", 2: "interrupted", 3: "internal error",
               4: "usage error", 5: "no tests collected"}
SHOWN_VERSIONS = ("python", "numpy", "hypothesis", "pytest", "cupy-cuda13x", "cupy-cuda12x", "cupy",
                  "llama-cpp-python", "torch", "transformers", "gguf", "scipy", "ml_dtypes", "pytest-xdist")


def tally(tests: list[dict[str, Any]]) -> Counter:
    return Counter(str(t.get("outcome", "unknown")) for t in tests if isinstance(t, dict))


def over_bound(worst_error: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Measurements whose err/bound exceeds 1 (or is NaN: a NaN error is never within a model)."""
    return [row for row in worst_error if isinstance(row, dict) and not as_float(row.get("ratio")) <= 1.0]


def not_covered(meta: dict[str, Any], tests: list[dict[str, Any]]) -> list[str]:
    names = [str(n) for n in meta.get("not_covered") or []]
    if not names:  # older results: recover the names from the skip reasons
        names = sorted({str(t.get("reason", "")).split("NOT COVERED:", 1)[1].strip()
                        for t in tests if "NOT COVERED:" in str(t.get("reason", ""))})
    return names


def judged_lines(results: dict[str, Any]) -> list[str]:
    """"N tests judged IMPL: P passed, F failed, C NOT COVERED", overall then per area, from the
    test rows marked ``judged`` (the tests that take the implementation); [] for older results."""
    rows = [t for t in results.get("tests") or [] if isinstance(t, dict) and t.get("judged")]
    if not rows:
        return []
    impl = (results.get("meta") or {}).get("impl", "?")

    def line(label: str, group: list[dict[str, Any]]) -> str:
        nc = sum(1 for t in group if t.get("outcome") == "skipped" and "NOT COVERED" in str(t.get("reason", "")))
        passed = sum(1 for t in group if t.get("outcome") == "passed")
        failed = sum(1 for t in group if t.get("outcome") in ("failed", "error"))
        return f"{label}{passed + failed + nc} tests judged {impl}: {passed} passed, {failed} failed, {nc} NOT COVERED"

    by_area: dict[str, list[dict[str, Any]]] = {}
    for t in rows:
        by_area.setdefault(area_of(str(t.get("nodeid", ""))), []).append(t)
    return [line("", rows)] + [line(f"{BY_KEY[k].title}: ", g) for k, g in sorted(by_area.items())]


def area_tiles(verdicts: list[Verdict]) -> str:
    tiles = []
    for v in verdicts:
        c = v.counts
        counts = f"{c.get('passed', 0)} passed · {c.get('failed', 0) + c.get('error', 0)} failed · {c.get('skipped', 0)} skipped"
        extra = f'<div class="tnote">{v.over_bound} past its error bound</div>' if v.over_bound else ""
        tiles.append(f'<a class="tile {v.state}" href="#area-{esc(v.area.key)}"><div class="tname">{esc(v.area.title)}'
                     f'</div><div class="tverdict">{esc(v.label)}</div><div class="tcount">'
                     f'{esc(counts) if sum(c.values()) else "no test ran"}</div>{extra}</a>')
    return f'<div class="areas">{"".join(tiles)}</div>'


def _error_line(f: dict[str, Any]) -> str:
    measured = "error_u" if "error_u" in f else "worst_u"  # results written before the Failure fields
    if measured not in f:
        return ""
    worst, bound, ratio = as_float(f.get(measured)), as_float(f.get("bound_u")), as_float(f.get("ratio"))
    width = 100 if not math.isfinite(ratio) else min(100.0, 100 * ratio / max(ratio, 1.0))
    mark = 100 / max(ratio, 1.0) if math.isfinite(ratio) else 0
    return (f'<div class="err"><b>error {esc(fmt_num(worst))} u</b> against a bound of {esc(fmt_num(bound))} u '
            f'(<span class="bad">{esc(fmt_num(ratio))}× the bound</span>) <span class="ebar"><span style="width:'
            f'{width:.0f}%"></span><i style="left:{mark:.0f}%"></i></span></div>')


def reproduce(t: dict[str, Any], meta: dict[str, Any]) -> str:
    if t.get("reproduce"):
        return str(t["reproduce"])
    template = str(meta.get("reproduce") or "python -m pytest {nodeid} --hypothesis-profile=" + str(meta.get("profile", "ci")))
    return template.replace("{nodeid}", shlex.quote(str(t.get("nodeid", "?"))))


def failure_item(i: int, t: dict[str, Any], meta: dict[str, Any]) -> str:
    f = t.get("failure") if isinstance(t.get("failure"), dict) else {}
    reason = truncate(str(t.get("reason") or "(no message recorded)"), FAILURE_CHARS)
    first, _, rest = reason.partition("\n")
    area = BY_KEY[area_of(str(t.get("nodeid", "")))].title
    prop = f.get("property") or str(t.get("nodeid", "?")).rsplit("::", 1)[-1]
    prop += "".join(f" · {x}" for x in (f.get("dtype"), f.get("category")) if x)
    why = f'<p class="crash">{esc(truncate(str(f.get("why") or first), 500))}</p>'
    case = f'<div class="case">shrunk case <code>{esc(truncate(str(f["case"]), 400))}</code></div>' if f.get("case") else ""
    opened = " open" if i < OPEN_FAILURES else ""
    trace = (f'<details{opened if not f else ""}><summary>traceback</summary><pre class="trace">'
             f"{esc(rest.strip() or first)}</pre></details>")
    return (f'<li><span class="abadge">{esc(area)}</span> <b>{esc(prop)}</b> <code class="nodeid">'
            f'{esc(t.get("nodeid", "?"))}</code>{why}{case}{_error_line(f)}<div class="repro">reproduce '
            f'<code>{esc(reproduce(t, meta))}</code></div>{trace}</li>')


def failures(results: dict[str, Any]) -> str:
    meta = results.get("meta") or {}
    bad = [t for t in results.get("tests") or [] if isinstance(t, dict) and t.get("outcome") in ("failed", "error")]
    if not bad:
        return ""
    order = {a.key: i for i, a in enumerate(AREAS)}
    bad.sort(key=lambda t: (order.get(area_of(str(t.get("nodeid", ""))), 99), str(t.get("nodeid"))))
    items = "".join(failure_item(i, t, meta) for i, t in enumerate(bad))
    return f'<section id="failures" class="failbox"><h2>Failures ({len(bad)})</h2><ol>{items}</ol></section>'


def _duration(s: float) -> str:
    if not math.isfinite(s):
        return fmt_num(s)
    return f"{s:.1f} s" if s < 60 else f"{int(s // 60)} min {int(s % 60):02d} s"


def environment(meta: dict[str, Any]) -> str:
    seed = ("fixed examples (derandomized)" if meta.get("derandomized") or meta.get("seed_effective") is False
            else f"seed {meta.get('seed')}" if meta.get("seed") is not None else "random seed (not recorded)")
    facts = [("impl", meta.get("impl")), ("backend", meta.get("backend")), ("device", meta.get("device")),
             ("profile", f"{meta.get('profile', '?')}, {seed}"), ("workers", meta.get("workers")),
             ("selection", meta.get("selection")), ("started", meta.get("date")),
             ("wall time", _duration(as_float(meta.get("duration_s"))) if meta.get("duration_s") is not None else None)]
    versions = meta.get("versions") if isinstance(meta.get("versions"), dict) else {}
    shown = [(k, versions[k]) for k in SHOWN_VERSIONS if k in versions and versions[k] != "absent"]
    env = " · ".join(f"<b>{esc(k)}</b> {esc(v)}" for k, v in facts if v not in (None, ""))
    ver = " · ".join(f"{esc(k)} {esc(v)}" for k, v in shown)
    return f'<div class="env"><div>{env}</div><div class="muted">{ver or "library versions not recorded"}</div></div>'


def header(results: dict[str, Any], verdicts: list[Verdict], changes_line: str = "") -> str:
    meta = results.get("meta") or {}
    counts = tally(results.get("tests") or [])
    failed, passed = counts.get("failed", 0) + counts.get("error", 0), counts.get("passed", 0)
    if failed:
        verdict, cls = f"{failed} test{'s' if failed != 1 else ''} FAILED", "verdict bad"
    elif not passed:
        verdict, cls = "No test passed: nothing was verified", "verdict warn"
    else:
        verdict, cls = "All selected tests passed", "verdict ok"
    totals = " · ".join(f"{n} {k}" for k, n in sorted(counts.items()))
    notes = []
    exceeded = over_bound(results.get("worst_error") or [])
    if exceeded:
        notes.append(f"{len(exceeded)} measurement(s) exceed their error model (ratio &gt; 1 or NaN).")
    code = meta.get("pytest_exit")
    if isinstance(code, int) and code not in (0, 1):
        notes.append(f"pytest exited with code {code} ({esc(PYTEST_EXIT.get(code, 'unknown'))}); "
                     "the results may be incomplete.")
    if meta.get("error"):
        notes.append(esc(truncate(str(meta["error"]), 600)))
    judged = judged_lines(results)
    if judged:
        notes.append("<b>" + esc(judged[0]) + "</b>" + "".join(f"<br>{esc(x)}" for x in judged[1:]))
    nc = not_covered(meta, results.get("tests") or [])
    if nc:
        notes.append(f'<a href="#not-covered">{len(nc)} function(s) NOT COVERED</a>: the implementation lacks them, '
                     "so their properties were skipped, not passed.")
    return f"""<header id="summary">
 <h1>logitcheck: <code>{esc(meta.get('impl', '?'))}</code> on {esc(meta.get('backend', '?'))}</h1>
 <div class="{cls}">{verdict} <span class="totals">{esc(totals)}</span></div>
 {changes_line}{''.join(f'<p class="note">{n}</p>' for n in notes)}
 {area_tiles(verdicts)}
 {environment(meta)}
</header>"""


def partly_judged(tests: list[dict[str, Any]]) -> list[str]:
    """"NODEID: judged on N of M cases" for each test some of whose cases were answered
    unsupported (the rest judged; ``case_coverage``)."""
    from properties.api import judged_line

    return [judged_line(str(t["nodeid"]), int(t["cases"]["of"]), int(t["cases"]["of"]) - int(t["cases"]["judged"]))
            for t in sorted(tests, key=lambda t: str(t.get("nodeid"))) if isinstance(t, dict) and t.get("cases")]


def not_covered_section(results: dict[str, Any]) -> str:
    nc = not_covered(results.get("meta") or {}, results.get("tests") or [])
    body = ("<p>Every function the selected tests asked for exists in the implementation.</p>" if not nc else
            "<p>The implementation lacks these, so their properties were <b>skipped, not passed</b>:</p><ul>"
            + "".join(f"<li><code>{esc(n)}</code></li>" for n in nc) + "</ul>")
    partly = partly_judged(results.get("tests") or [])
    if partly:
        body += ("<p>NOT COVERED per case: these tests were judged on the cases the implementation supports "
                 "only:</p><ul>" + "".join(f"<li><code>{esc(x)}</code></li>" for x in partly) + "</ul>")
    return f'<section id="not-covered" class="{"warnbox" if nc or partly else ""}"><h2>NOT COVERED ({len(nc)})</h2>{body}</section>'


def test_list(results: dict[str, Any]) -> str:
    tests = [t for t in results.get("tests") or [] if isinstance(t, dict)]
    if not tests:
        return '<section id="tests"><h2>Tests</h2><p class="muted">No test outcomes were recorded.</p></section>'
    reasons = Counter(str(t.get("reason") or "(no reason)") for t in tests if t.get("outcome") == "skipped")
    skip_rows = "".join(f"<tr><td>{n}</td><td>{esc(truncate(r, 400))}</td></tr>" for r, n in reasons.most_common())
    skips = (f'<h3>Skip reasons</h3><table class="grid"><thead><tr><th>tests</th><th>reason</th></tr></thead>'
             f"<tbody>{skip_rows}</tbody></table>" if reasons else "")
    order = {"failed": 0, "error": 0, "skipped": 2, "passed": 1}
    rows = "".join(
        f'<tr class="{esc(t.get("outcome", ""))}"><td><code>{esc(t.get("nodeid", "?"))}</code></td>'
        f'<td>{esc(t.get("outcome", "?"))}</td><td class="num">{esc(fmt_num(t.get("duration")))}</td></tr>'
        for t in sorted(tests, key=lambda t: (order.get(t.get("outcome"), 3), str(t.get("nodeid")))))
    total = sum(as_float(t.get("duration")) for t in tests if math.isfinite(as_float(t.get("duration"))))
    slow = sorted(tests, key=lambda t: -as_float(t.get("duration")) if math.isfinite(as_float(t.get("duration"))) else 0)[:10]
    slow_rows = "".join(f'<tr><td><code>{esc(t.get("nodeid"))}</code></td><td class="num">'
                        f'{esc(fmt_num(t.get("duration")))}</td></tr>' for t in slow)
    return f"""<section id="tests"><h2>Tests ({len(tests)}, {total:.1f} s in test bodies)</h2>{skips}
<details><summary>The ten slowest tests</summary><table class="grid"><tbody>{slow_rows}</tbody></table></details>
<details><summary>Every test outcome</summary><table class="grid"><thead><tr><th>node id</th><th>outcome</th>
<th>seconds</th></tr></thead><tbody>{rows}</tbody></table></details></section>"""
