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
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return '<p class="muted">matplotlib is not installed: the per-layer plot is omitted.</p>'
    from oracle.models.layers import graph_order
    from reports.plots import _png

    fig = Figure(figsize=(10, 2.6 * len(series)))
    for i, arch in enumerate(sorted(series)):
        ax = fig.add_subplot(len(series), 1, i + 1)
        names = graph_order(sorted({n for _, v in series[arch] for n in v}))
        for label, vals in series[arch]:
            xs = [j for j, n in enumerate(names) if n in vals and vals[n] > 0 and math.isfinite(vals[n])]
            gaps = len(xs) < len(names)  # a run that kept only some tensors (the goldens) is not joined up
            ax.plot(xs, [vals[names[j]] for j in xs], marker="o", markersize=4 if gaps else 3,
                    linestyle="none" if gaps else "-", linewidth=1, label=label)
        ax.set_yscale("log")
        ax.set_xticks(range(len(names)), names, rotation=70, fontsize=6)
        ax.set_title(arch, fontsize=9, loc="left")
        ax.set_ylabel("max|Δ| / max|ref|", fontsize=7)
        ax.legend(fontsize=7, frameon=False, loc="upper left")
        ax.grid(axis="y", color="#ddd", linewidth=0.5)
    fig.tight_layout()
    alt = "Per-tensor relative error of llama.cpp and gpu_impl against the oracle, per model family"
    return f'<img class="plot" alt="{esc(alt)}" src="data:image/png;base64,{_png(fig)}">'


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
    parts = ['<section id="model-parity"><h2>Whole-model parity</h2>', f'<p class="lead">{esc(LEAD)}</p>']
    if isinstance(parity, dict) and parity:
        parts += [_fixture_rows(parity), "<h3>Per-layer error against the oracle</h3>", layer_plot(parity)]
    elif parity is not None:
        parts.append(generic(parity))
    if isinstance(mutants, dict) and mutants:
        parts += ["<h3>Ops-zoo mutants through gpu_impl's forward pass: where each one enters</h3>",
                  _mutant_rows(mutants)]
    elif mutants is not None:
        parts.append(generic(mutants))
    return "".join(parts) + "</section>"
