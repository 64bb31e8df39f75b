"""The report's whole-model parity section, from the tables the model properties record:

* ``model_parity`` = {fixture: {section: values}}: "llama.cpp vs oracle" (KLD, same top-1,
  max |Δlogit| against its bound, cosine and whether it misleads, per-layer relative error),
  "gpu_impl float32/float16 vs oracle", "KLD vs F32 twin", "llama.cpp live";
* ``model_mutants`` = {mutant: {bug, verdict, first tensor, op, detail}}: where each ops-zoo
  mutant enters the forward pass.
Nothing is recomputed here; a malformed table is shown as it is.
"""
from __future__ import annotations

import math
from typing import Any

from reports.sections import Context, section
from reports.tables import as_float, esc, fmt_num, generic

LLAMA, TWIN = "llama.cpp vs oracle", "KLD vs F32 twin"
GPU = ("gpu_impl float32 vs oracle", "gpu_impl float16 vs oracle")
LEAD = ("Tiny llama-, qwen3- and gemma2-style GGUF models (fixtures/gguf_gen, seed 0), 24 tokens each. "
        "The float64 oracle's forward pass against llama.cpp's goldens and against gpu_impl's pass; "
        "bounds come from each engine's error model (properties/models/error_model.py). "
        "Same top-1 counts every position; where the oracle's top-1 margin is within twice the bound "
        "either token is legal.")


def _ratio_cell(err: Any, bound: Any) -> str:
    e, b = as_float(err), as_float(bound)
    r = e / b if b > 0 else math.nan
    bad = not r <= 1.0
    return (f'<td class="num{" bad" if bad else ""}">{esc(fmt_num(e))} '
            f'<span class="muted">/ {esc(fmt_num(b))}</span></td>')


def _fixture_rows(parity: dict[str, Any]) -> str:
    body = []
    for fx in sorted(parity, key=lambda f: (f.split("-")[0], ["F32", "F16", "Q8_0", "Q4_K"].index(f.split("-", 1)[1])
                                           if f.split("-", 1)[-1] in ("F32", "F16", "Q8_0", "Q4_K") else 9)):
        sec = parity[fx] if isinstance(parity[fx], dict) else {}
        ll = sec.get(LLAMA) if isinstance(sec.get(LLAMA), dict) else {}
        twin = sec.get(TWIN) if isinstance(sec.get(TWIN), dict) else {}
        cos = as_float(ll.get("cosine_min"))
        warn = ' <span class="emflag">misleading</span>' if ll.get("cosine_misleading") else ""
        gpu = "".join(_ratio_cell(sec[g].get("max_abs_dlogit"), sec[g].get("dlogit_bound"))
                      if isinstance(sec.get(g), dict) else '<td class="muted">—</td>' for g in GPU)
        body.append(
            f"<tr><td class=\"nw\">{esc(fx)}</td><td class=\"num\">{esc(fmt_num(ll.get('mean_kld')))}</td>"
            f"{_ratio_cell(ll.get('max_kld'), ll.get('kld_bound'))}"
            f"<td class=\"num\">{esc(fmt_num(as_float(ll.get('same_top1')) * 100))} % "
            f"<span class=\"muted\">({esc(fmt_num(ll.get('may_differ_positions')))} may differ)</span></td>"
            f"{_ratio_cell(ll.get('max_abs_dlogit'), ll.get('dlogit_bound'))}"
            f"<td class=\"num\">{esc(f'{cos:.6f}' if math.isfinite(cos) else fmt_num(cos))}{warn}</td>{gpu}"
            f"<td class=\"num\">{esc(fmt_num(twin.get('oracle')))}</td>"
            f"<td class=\"num\">{esc(fmt_num(twin.get('llama.cpp')))}</td></tr>")
    return ("<table class=\"grid\"><thead><tr><th>fixture</th><th>mean KLD</th><th>max KLD / bound</th>"
            "<th>same top-1</th><th>max |Δlogit| / bound</th><th>cosine (min)</th>"
            "<th>gpu_impl fp32: max |Δlogit| / bound</th><th>gpu_impl fp16: max |Δlogit| / bound</th>"
            "<th>KLD vs F32 twin (oracle)</th><th>KLD vs F32 twin (llama.cpp)</th></tr></thead>"
            f"<tbody>{''.join(body)}</tbody></table>")


def layer_plot(parity: dict[str, Any]) -> str:
    """Relative error per tensor, in graph order, one panel per family (F32 for llama.cpp and
    gpu_impl fp32, F16 for gpu_impl fp16)."""
    series: dict[str, list[tuple[str, dict[str, float]]]] = {}
    for fx, sec in parity.items():
        if not isinstance(sec, dict) or "-" not in fx:
            continue
        arch, wtype = fx.split("-", 1)
        for label, key, want in (("llama.cpp", LLAMA, "F32"), ("gpu_impl fp32", GPU[0], "F32"),
                                 ("gpu_impl fp16", GPU[1], "F16")):
            vals = sec.get(key, {}).get("layer_rel_err") if isinstance(sec.get(key), dict) else None
            if wtype == want and isinstance(vals, dict) and vals:
                series.setdefault(arch, []).append((label, {k: as_float(v) for k, v in vals.items()}))
    if not series:
        return '<p class="muted">No per-layer errors were recorded.</p>'
    from oracle.models.layers import graph_order

    alt = "Per-tensor relative error of llama.cpp and gpu_impl against the oracle, per model family"
    panels = [_layer_panel(arch, graph_order(sorted({n for _, v in series[arch] for n in v})), series[arch])
              for arch in sorted(series)]
    return f'<div class="plot" role="img" aria-label="{esc(alt)}">{"".join(panels)}</div>'


_COLOURS = {"llama.cpp": "#3b6ea8", "gpu_impl fp32": "#d08c2e", "gpu_impl fp16": "#6a9f48"}


def _layer_panel(arch: str, names: list[str], runs: list[tuple[str, dict[str, float]]]) -> str:
    """One inline-SVG panel: log10(max|Δ| / max|ref|) per tensor in graph order, one series per run.
    A run that kept only some tensors (the goldens) is drawn as points, not joined up."""
    W, H, L, T, B = max(360, 14 * len(names)), 150, 46, 18, 92  # plot size and margins (left, top, bottom)
    vals = [v[n] for _, v in runs for n in v if v[n] > 0 and math.isfinite(v[n])]
    if not vals:
        return f'<p class="muted">{esc(arch)}: no positive errors to plot.</p>'
    lo, hi = math.floor(math.log10(min(vals))), math.ceil(math.log10(max(vals)))
    hi = hi if hi > lo else lo + 1
    x = lambda j: L + (j + 0.5) * W / len(names)  # noqa: E731
    y = lambda v: T + H * (hi - math.log10(v)) / (hi - lo)  # noqa: E731
    parts = [f'<text x="{L}" y="12" class="ax">{esc(arch)}</text>']
    for e in range(lo, hi + 1):
        parts.append(f'<line x1="{L}" x2="{L + W}" y1="{y(10.0 ** e):.1f}" y2="{y(10.0 ** e):.1f}" stroke="#ddd"/>'
                     f'<text x="{L - 4}" y="{y(10.0 ** e) + 3:.1f}" text-anchor="end" class="ax">1e{e}</text>')
    for j, n in enumerate(names):
        parts.append(f'<text transform="translate({x(j):.1f},{T + H + 6}) rotate(70)" class="ax">{esc(n)}</text>')
    for i, (label, v) in enumerate(runs):
        colour = _COLOURS.get(label, "#8a7cb8")
        pts = [(x(j), y(v[n])) for j, n in enumerate(names) if n in v and v[n] > 0 and math.isfinite(v[n])]
        if len(pts) == len(names):
            parts.append(f'<polyline fill="none" stroke="{colour}" stroke-width="1" points="'
                         + " ".join(f"{a:.1f},{b:.1f}" for a, b in pts) + '"/>')
        parts += [f'<circle cx="{a:.1f}" cy="{b:.1f}" r="2.2" fill="{colour}"/>' for a, b in pts]
        parts.append(f'<text x="{L + 8 + 110 * i}" y="{T + 10}" fill="{colour}" class="ax">{esc(label)}</text>')
    return (f'<svg width="{L + W + 8}" height="{T + H + B}" class="layers">'
            f'<title>{esc(arch)}: max|Δ| / max|ref| per tensor</title>{"".join(parts)}</svg>')


def _mutant_rows(mutants: dict[str, Any]) -> str:
    body = []
    for name in sorted(mutants):
        m = mutants[name] if isinstance(mutants[name], dict) else {"detail": mutants[name]}
        verdict = str(m.get("verdict", "?"))
        cls = "ok" if verdict in ("diverges", "raises") else "muted"
        body.append(f"<tr><td class=\"nw\">{esc(name)}</td><td>{esc(m.get('bug', ''))}</td>"
                    f"<td class=\"{cls}\">{esc(verdict)}</td><td class=\"nw\">{esc(m.get('first tensor', ''))}</td>"
                    f"<td>{esc(m.get('op', ''))}</td><td>{esc(m.get('detail', ''))}</td></tr>")
    return ("<table class=\"grid\"><thead><tr><th>mutant</th><th>bug</th><th>verdict</th><th>first tensor</th>"
            f"<th>op</th><th>detail / why not</th></tr></thead><tbody>{''.join(body)}</tbody></table>")


def model_parity_section(tables: dict[str, Any]) -> str:
    parity, mutants = tables.get("model_parity"), tables.get("model_mutants")
    parts = ['<section id="model-parity"><h3>Whole-model parity</h3>', f'<p class="lead">{esc(LEAD)}</p>']
    if isinstance(parity, dict) and parity:
        parts += [_fixture_rows(parity), "<h4>Per-layer error against the oracle</h4>", layer_plot(parity)]
    elif parity is not None:
        parts.append(generic(parity))
    if isinstance(mutants, dict) and mutants:
        parts += ["<h4>Ops-zoo mutants through gpu_impl's forward pass: where each one enters</h4>",
                  _mutant_rows(mutants)]
    elif mutants is not None:
        parts.append(generic(mutants))
    return "".join(parts) + "</section>"


@section("model-parity", "Whole-model parity", area="parity", order=20, tables=("model_parity", "model_mutants"))
def _parity(ctx: Context) -> str:
    return model_parity_section(ctx.tables)
