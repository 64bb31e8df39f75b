"""results.json → one self-contained HTML page (inline CSS, plots as inline PNG, no scripts, no
external resources). ``render`` only reads what the run measured; it never recomputes a number."""
from __future__ import annotations

from typing import Any

from reports.backend import backend_section
from reports.engine_matrix import engine_matrix_section
from reports.order_matrix import order_matrix_section
from reports.parity_section import model_parity_section
from reports.plots import ratio_plot
from reports.precision import cosine_lies_section, ops_error_section
from reports.records import records_section
from reports.sampling_rules import sampling_rules_section
from reports.summary import failures, header, tally, test_list
from reports.tables import esc, generic
from reports.zoo import is_zoo, zoo_section

TITLES = {  # titles and one-line explanations for the tables the suite is known to record
    "llama_cpp_findings": ("llama.cpp peer findings",
                           "Where llama.cpp (via llama-cpp-python) and the float64 oracle disagree, "
                           "with the witness that shows it."),
    "llama_cpp_findings_chain": ("llama.cpp peer findings: sampler chains", ""),
    "llama_cpp_peer": ("llama.cpp peer agreement per sampler", ""),
    "llama_cpp_backend": ("llama.cpp backend samplers (ggml graph ops) vs the oracle",
                          "Rows judged, identical to the oracle, inside the float32 error model, and each "
                          "disagreement class with its count."),
    "llama_cpp_backend_classes": ("llama.cpp backend: disagreement classes", ""),
    "quant_peer_findings": ("gguf-py peer findings (quantization formats)", ""),
    "stats_gate": ("Statistics gate calibration",
                   "How the statistical tests' thresholds were set and what false-failure rate and power "
                   "they were measured to have."),
    "distribution_gof": ("Sampling distributions: goodness of fit", ""),
    "peer_transformers": ("HF transformers peer: warpers vs the oracle's transformers variant",
                          "Each HF warper (torch on CPU) and a generate-style chain on hypothesis-drawn rows. "
                          "identical_sets: examples where both zeroed the same tokens; tie_permuted: the sets "
                          "differed only in which of several equal scores was dropped (torch.sort is not stable); "
                          "boundary_bracketed: a threshold landed within the float32 rounding bracket; "
                          "max_prob_diff: largest probability difference; worst_u: largest error of a logit "
                          "transform, in units of u."),
}
NAV = {"llama_cpp_findings": "llama.cpp", "stats_gate": "Stats gate"}


def _group(name: str) -> int:
    """Page order: peer findings, then statistics, then everything else."""
    if "findings" in name or "peer" in name:
        return 0 if name == "llama_cpp_findings" else 1
    if "stats" in name or "gof" in name:
        return 2
    return 3


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
"""


def _section(name: str, value: Any) -> str:
    title, intro = TITLES.get(name, (name.replace("_", " ").capitalize(), ""))
    intro_html = f'<p class="muted">{esc(intro)}</p>' if intro else ""
    return f'<section id="table-{esc(name)}"><h2>{esc(title)}</h2>{intro_html}{generic(value)}</section>'


ENGINE_TABLES = ("engine_matrix", "engine_matrix_max_tvd")  # both drawn by the engine matrix section
MODEL_TABLES = ("model_parity", "model_mutants")  # both drawn by the whole-model parity section
SPECIAL = ("order_matrix", "engine_sampling_rules", "ops_error_u", "cosine_lies") + ENGINE_TABLES + MODEL_TABLES


def table_sections(tables: dict[str, Any], worst_error: list[dict[str, Any]] | None = None,
                   tests: list[dict[str, Any]] | None = None) -> list[tuple[str, str, str]]:
    """(anchor, nav label, html) for every named table: known kinds first, the rest generically."""
    out = []
    if "llama_cpp_backend" in tables:
        out.append(("llama-cpp-backend", "llama.cpp backend", backend_section(tables)))
    if "order_matrix" in tables:
        out.append(("order-matrix", "Order matrix", order_matrix_section(tables["order_matrix"])))
    if any(n in tables for n in ENGINE_TABLES):
        out.append(("engine-matrix", "Engine matrix", engine_matrix_section(tables)))
    if "engine_sampling_rules" in tables:
        out.append(("table-engine_sampling_rules", "Sampling rules",
                    sampling_rules_section(tables["engine_sampling_rules"])))
    if "ops_error_u" in tables:
        out.append(("table-ops_error_u", "Op precision", ops_error_section(tables["ops_error_u"], worst_error)))
    if "cosine_lies" in tables:
        out.append(("table-cosine_lies", "Cosine lies", cosine_lies_section(tables["cosine_lies"])))
    if any(n in tables for n in MODEL_TABLES):
        out.append(("model-parity", "Model parity", model_parity_section(tables)))
    for name in sorted((n for n in tables if is_zoo(n)), key=lambda n: (n != "zoo_samplers", n)):
        out.append((f"table-{name}", name.replace("_", " "), zoo_section(name, tables[name], tests)))
    for name in sorted((n for n in tables if n not in SPECIAL and not is_zoo(n)), key=lambda n: (_group(n), n)):
        out.append((f"table-{name}", NAV.get(name, name.replace("_", " ")), _section(name, tables[name])))
    return out


def render(results: dict[str, Any]) -> str:
    """The whole report page for one results.json (already parsed)."""
    if not isinstance(results, dict):
        raise ValueError(f"results must be the parsed results.json object (a dict), not {type(results).__name__}")
    meta = results.get("meta") if isinstance(results.get("meta"), dict) else {}
    results = {**results, "meta": meta}
    tables = results.get("tables") if isinstance(results.get("tables"), dict) else {}
    extra = table_sections(tables, [w for w in results.get("worst_error") or [] if isinstance(w, dict)],
                           [t for t in results.get("tests") or [] if isinstance(t, dict)])
    counts = tally(results.get("tests") or [])
    nav = [("failures", f"Failures ({counts.get('failed', 0)})")] if counts.get("failed") else []
    nav += [("not-covered", "Not covered"), ("records", "Records"), ("plot", "Error plot")]
    nav += [(a, label) for a, label, _ in extra] + [("tests", "Tests")]
    nav_html = "".join(f'<a href="#{esc(a)}">{esc(label)}</a>' for a, label in nav)
    measured = {str(w.get("record")) for w in results.get("worst_error") or [] if isinstance(w, dict)}
    unplotted = sorted({str(e.get("record")) for e in results.get("examples") or []
                        if isinstance(e, dict) and str(e.get("record")) not in measured})
    unplotted_html = (f'<p class="muted">{len(unplotted)} records are not plotted: their properties are exact or '
                      "set-valued, so no error in u was measured (see the records section).</p>"
                      if unplotted else "")
    plot = (f'<section id="plot"><h2>Worst error / model bound, per record and input dtype</h2>'
            f"{ratio_plot(results.get('worst_error') or [])}{unplotted_html}</section>")
    title = f"logitcheck: {meta.get('impl', '?')} on {meta.get('backend', '?')}"
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{esc(title)}</title><style>{CSS}</style></head>
<body><nav>{nav_html}</nav>
{header(results)}
{failures(results)}
{records_section(results)}
{plot}
{''.join(h for _, _, h in extra)}
{test_list(results)}
<footer>Generated by logitcheck from results.json; every number above was measured by the run, not
recomputed here. Full values (untruncated) are in results.json.</footer>
</body></html>
"""
