"""results.json → one self-contained HTML page (inline CSS and SVG, no scripts, no external
resources). ``render`` only reads what the run measured; it never recomputes a number.

Page order: the first screen (overall verdict, a verdict per area, failures with their shrunk case,
error in u and reproducing command, the environment), then the changes since a baseline, then one
part per area holding its registered sections (``reports/sections.py``), then the test list."""
from __future__ import annotations

from typing import Any

from reports.areas import AREAS, OTHER, Verdict, verdicts
from reports.baseline import Changes, changes_section, summary_line
from reports.builtin_sections import TITLES
from reports.sections import Drawn, draw
from reports.summary import failures, header, not_covered_section, tally, test_list
from reports.tables import esc

CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0 auto;max-width:1280px;
 padding:0 24px 48px;color:#1d2330;background:#fff}
h1{font-size:22px;margin:20px 0 8px}h2{font-size:18px;margin:28px 0 8px;border-bottom:2px solid #e3e7ee;
 padding-bottom:4px}h3{font-size:14px;margin:14px 0 6px}
code{font:12px ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;background:#f3f5f8;padding:0 3px;border-radius:3px}
nav{position:sticky;top:0;background:#fff;border-bottom:1px solid #e3e7ee;padding:6px 0;z-index:2;font-size:13px}
nav a{margin-right:14px;color:#2c5aa0;text-decoration:none}
.verdict{font-size:20px;font-weight:700;padding:10px 14px;border-radius:6px;margin:8px 0}
.verdict.ok{background:#e5f4e8;color:#1e6b2f}.verdict.bad{background:#fbe4e2;color:#a1261b}
.verdict.warn{background:#fff2d6;color:#8a5a00}
.pill{display:inline-block;padding:2px 10px;border-radius:12px;background:#eef1f5;font-weight:600}
.pill.ok{background:#e5f4e8;color:#1e6b2f}.pill.bad{background:#fbe4e2;color:#a1261b}.pill.skip{background:#fff2d6}
.note{margin:4px 0;color:#6b4a00}.note.bad{color:#a1261b}
.cols{display:flex;gap:28px;flex-wrap:wrap}.cols>div{min-width:260px}
.warnbox{background:#fff8e6;border:1px solid #f0d48a;border-radius:6px;padding:2px 14px;margin-top:12px}
.failbox{background:#fdf1f0;border:1px solid #f0b8b2;border-radius:6px;padding:2px 14px}
.failbox li{margin-bottom:10px}.crash{font:12px ui-monospace,Menlo,Consolas,monospace;color:#8c1d12;
 margin:4px 0;white-space:pre-wrap;word-break:break-word}
pre.trace{white-space:pre-wrap;word-break:break-word;font:12px ui-monospace,Menlo,Consolas,monospace;
 background:#fff;border:1px solid #eed;padding:8px;max-height:320px;overflow:auto}
table{border-collapse:collapse;margin:6px 0}
table.grid th,table.grid td,table.kv th,table.kv td{border:1px solid #dde2ea;padding:3px 7px;vertical-align:top;
 text-align:left}
table.grid thead th{background:#f3f5f8;position:sticky;top:30px}
table.kv th{background:#f7f8fa;font-weight:600;white-space:nowrap}
table.grid td table,table.kv td table{margin:0;font-size:12px}
tr.bad td,tr.failed td{background:#fdecea}tr.skipped td{color:#7a6a40}
td.num{text-align:right;font-variant-numeric:tabular-nums}
table.grid td{overflow-wrap:anywhere}table.grid td.num,table.grid td.nw{white-space:nowrap;overflow-wrap:normal}
.long,.inline{font-size:12px}.inline b{font-weight:600;color:#445}
.ok{color:#1e6b2f;font-weight:700}.bad{color:#a1261b;font-weight:700}.muted{color:#667}
table.matrix td,table.matrix th{border:1px solid #dde2ea;width:26px;height:24px;text-align:center;padding:0}
table.matrix th.rowh{text-align:right;padding:0 6px;width:auto;white-space:nowrap}
table.matrix th.rot{height:110px;vertical-align:bottom}
table.matrix th.rot div{writing-mode:vertical-rl;transform:rotate(180deg);white-space:nowrap;margin:0 auto 4px}
td.commute{background:#e5f4e8;color:#1e6b2f}td.differs{background:#f6c9c4;color:#8c1d12;font-weight:700;cursor:help}
td.untested{background:#f6f7f9;color:#aab}td.diag{background:#eceff3;color:#99a}td.other{background:#fff2d6}
p.lead{max-width:980px}
table.engm{border-collapse:separate;border-spacing:3px;margin:8px 0;table-layout:fixed}
table.engm th{font-size:12px;text-align:left;vertical-align:bottom;padding:2px 4px;font-weight:600}
table.engm th.rowh{text-align:right;white-space:nowrap;vertical-align:middle;padding-right:8px}
td.em{border-radius:4px;padding:5px 7px;vertical-align:top;font-size:11px;line-height:1.3;width:150px;cursor:help}
td.em.same{background:#e5f4e8;color:#1e6b2f}td.em.na{background:repeating-linear-gradient(45deg,#f3f4f6 0 6px,#eceef1 6px 12px);color:#778}
td.em.untested{background:#f6f7f9;color:#aab;text-align:center}
.emtvd{font-size:15px;font-weight:700;font-variant-numeric:tabular-nums}
.emsub{font-size:11px;color:inherit;opacity:.8;font-weight:400}.emnote{font-size:11px;color:#8a5a00;font-weight:600}
.emflag{font-size:11px;font-weight:800;background:#fff;color:#a1261b;display:inline-block;padding:0 4px;border-radius:3px}
ul.emwhy{margin:4px 0 0;padding:3px 4px 3px 16px;background:rgba(255,255,255,.88);color:#2a1a18;border-radius:3px}
ul.emwhy li{margin:0 0 2px}ul.emwhy li.emmore{list-style:none;margin-left:-12px;color:#667}
.emlegend{margin:8px 0;font-size:12px}.sw{display:inline-block;padding:1px 8px;margin-right:2px;border-radius:3px;
 font-variant-numeric:tabular-nums}.sw.na{background:#eceef1;color:#778}
table.emw td{font-size:12px}table.emw td:nth-child(5),table.emw td:nth-child(6),table.emw td:nth-child(7){max-width:340px}
.bar{display:inline-block;width:70px;height:8px;background:#eef1f5;border-radius:4px;margin-right:6px;vertical-align:middle}
.bar span{display:block;height:8px;border-radius:4px}
.lies{background:#fdf6ec;border:1px solid #efcf9a;border-radius:6px;padding:4px 16px 8px}
.tiles{display:flex;gap:14px;flex-wrap:wrap;margin:8px 0}.tile{background:#fff;border:1px solid #efdcbc;border-radius:6px;
 padding:8px 14px;min-width:170px}.tile .big{font-size:24px;font-weight:700;color:#8c1d12;font-variant-numeric:tabular-nums}
img.plot{max-width:100%;border:1px solid #e3e7ee;border-radius:4px}
details>summary{cursor:pointer;color:#2c5aa0;margin:6px 0}
footer{margin-top:40px;color:#889;font-size:12px}
nav a.st-fail{color:#a1261b;font-weight:700}nav a.st-not-run,nav a.st-skipped{color:#889}
.verdict .totals{font-size:13px;font-weight:400;margin-left:10px;color:#333}
.areas{display:grid;grid-template-columns:repeat(auto-fill,minmax(112px,1fr));gap:8px;margin:10px 0}
a.tile{display:block;box-sizing:border-box;min-width:0;overflow:hidden;border-radius:6px;padding:6px 10px;text-decoration:none;color:inherit;border:1px solid #dde2ea}
a.tile.pass{background:#eef8f0;border-color:#b7dfc0}a.tile.fail{background:#fbe4e2;border-color:#eba79f}
a.tile.skipped,a.tile.not-run{background:#f6f7f9;color:#778}
.tname{font-size:12px;font-weight:600}.tverdict{font-size:17px;font-weight:800}.tile.pass .tverdict{color:#1e6b2f}
.tile.fail .tverdict{color:#a1261b}.tcount{font-size:11px;color:#556}.tnote{font-size:11px;color:#a1261b;font-weight:600}
.env{font-size:12px;background:#f7f8fa;border-radius:6px;padding:6px 10px;margin:8px 0}
p.changes{font-weight:600;margin:6px 0}p.changes.bad{color:#a1261b}p.changes.ok{color:#1e6b2f}
.abadge{display:inline-block;font-size:11px;font-weight:700;background:#a1261b;color:#fff;border-radius:3px;padding:0 5px}
.case,.repro,.err{font-size:12px;margin:3px 0}.case code{white-space:pre-wrap}.repro code{user-select:all;background:#fff;border:1px solid #eed}
.ebar{display:inline-block;position:relative;width:120px;height:8px;background:#eef1f5;border-radius:4px;
 vertical-align:middle;margin-left:6px}.ebar span{display:block;height:8px;background:#c0392b;border-radius:4px}
.ebar i{position:absolute;top:-3px;width:2px;height:14px;background:#1d2330}
section.area{border-top:3px solid #e3e7ee;margin-top:26px}section.area.fail{border-top-color:#eba79f}
section.notrun h3{color:#889}svg.hist{display:block}svg.hist .ax{font:9px sans-serif;fill:#778}
ol.cases{margin:4px 0;padding-left:18px;font-size:12px}table.dist td{vertical-align:middle}
table.dist{width:100%}table.dist td.wi{font-size:12px;min-width:220px}table.dist td.numw{text-align:right;font-variant-numeric:tabular-nums}table.dist td.wi code{word-break:break-all}
table.dist td.nw .muted{font-size:11px;white-space:normal;overflow-wrap:anywhere;max-width:220px}
"""


def _area_part(v: Verdict, drawn: list[Drawn]) -> str:
    c = v.counts
    counts = ", ".join(f"{n} {k}" for k, n in sorted(c.items())) or "no test ran"
    body = "".join(d.html for d in drawn) or '<p class="muted">No section of this area has data.</p>'
    return (f'<section class="area {v.state}" id="area-{esc(v.area.key)}"><h2>{esc(v.area.title)}: '
            f'<span class="{"bad" if v.state == "fail" else "ok" if v.state == "pass" else "muted"}">{esc(v.label)}</span>'
            f' <span class="muted">({esc(counts)})</span></h2>{body}</section>')


def render(results: dict[str, Any], changes: Changes | None = None) -> str:
    """The whole report page for one results.json (already parsed), and the changes since a baseline."""
    if not isinstance(results, dict):
        raise ValueError(f"results must be the parsed results.json object (a dict), not {type(results).__name__}")
    meta = results.get("meta") if isinstance(results.get("meta"), dict) else {}
    results = {**results, "meta": meta}
    vs = verdicts(results)
    drawn = draw(results, TITLES)
    known = {a.key for a in AREAS}
    if any(d.ran and d.area not in known for d in drawn) and not any(v.area.key == OTHER.key for v in vs):
        vs.append(Verdict(OTHER, tally([]), 0))
    counts = tally(results.get("tests") or [])
    nav = [("summary", "Summary", "")]
    nav += [("changes", "Changes", "st-fail" if changes.worse else "")] if changes else []
    nav += [("failures", f"Failures ({counts.get('failed', 0)})", "st-fail")] if counts.get("failed") else []
    nav += [(f"area-{v.area.key}", v.area.title, f"st-{v.state}") for v in vs]
    nav += [("not-covered", "Not covered", ""), ("tests", "Tests", "")]
    nav_html = "".join(f'<a href="#{esc(a)}" class="{c}">{esc(label)}</a>' for a, label, c in nav)
    parts = "".join(_area_part(v, [d for d in drawn if (d.area if d.area in known else OTHER.key) == v.area.key])
                    for v in vs)
    title = f"logitcheck: {meta.get('impl', '?')} on {meta.get('backend', '?')}"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(title)}</title><style>{CSS}</style></head>
<body><nav>{nav_html}</nav>
{header(results, vs, summary_line(changes) if changes else "")}
{failures(results)}
{changes_section(changes) if changes else ""}
{parts}
{not_covered_section(results)}
{test_list(results)}
<footer>Generated by logitcheck from results.json (schema version {esc(results.get("schema_version", 1))}); every
number above was measured by the run, not recomputed here. Full values (untruncated) are in results.json.</footer>
</body></html>
"""
