"""Op precision in units of u (``ops_error_u``, joined with ``worst_error`` for the model bound at the
tightest element) and the cosine-similarity counterexample (``cosine_lies``)."""
from __future__ import annotations

import math
from typing import Any

from reports.tables import as_float, esc, fmt_num, generic, inline

OPS_LEAD = ('<p class="muted">Every output element of each op is compared with the float64 oracle and its '
            "error expressed in units of u = 2<sup>−24</sup> (fp32 compute) times the element's natural scale. "
            "p50/p90/p99 are upper edges of 5 %-wide logarithmic histogram bins, so each is an upper bound "
            "(≤ 0.001 means the element was exact or within 10<sup>−3</sup> u); max is exact. The error model's "
            "bound differs per element (it grows with reduction length and conditioning), so the last columns "
            "show the element that came closest to its own bound: its error, that bound, and the ratio (a "
            "ratio above 100 % fails). Rows are sorted by that ratio, closest to failing first.</p>")


def _pct_bar(ratio: float) -> str:
    if math.isnan(ratio):
        return '<span class="bad">NaN</span>'
    colour = "#2e8b47" if ratio < 0.5 else ("#d39a00" if ratio <= 1.0 else "#c0392b")
    width = max(1.0, min(ratio, 1.0) * 100)
    return (f'<div class="bar"><span style="width:{width:.0f}%;background:{colour}"></span></div>'
            f'<span class="{"bad" if ratio > 1 else ""}">{esc(fmt_num(ratio * 100))} %</span>')


def _le(x: Any) -> str:
    v = as_float(x)
    return "≤ 0.001" if v <= 1e-3 else esc(fmt_num(v))


def ops_error_section(value: Any, worst_error: list[dict[str, Any]] | None = None) -> str:
    title = "Op precision (error in units of u)"
    if not isinstance(value, dict) or not value or not all(isinstance(v, dict) for v in value.values()):
        return f'<section id="table-ops_error_u"><h3>{title}</h3>{generic(value)}</section>'
    tight = {(str(w.get("record")), str(w.get("property")), str(w.get("dtype"))): w
             for w in worst_error or [] if isinstance(w, dict)}
    rows = []
    for key, v in value.items():
        op, prop, dtype = (str(key).split("|") + ["", ""])[:3]
        w = tight.get((op, prop, dtype), {})
        ratio = as_float(v.get("worst_of_bound", w.get("ratio")))
        rows.append((ratio, op, prop, dtype, v, w))
    rows.sort(key=lambda r: (-math.inf if math.isnan(r[0]) else -r[0], r[1], r[2], r[3]))
    body = []
    for ratio, op, prop, dtype, v, w in rows:
        shown = "impl ≡ oracle" if prop == f"impl_vs_oracle[{op}]" else prop
        bad = math.isnan(ratio) or ratio > 1.0 or math.isnan(as_float(v.get("max_u")))
        body.append(
            f'<tr{" class=bad" if bad else ""}><td class="nw">{esc(op)}</td><td>{esc(shown)}</td>'
            f'<td class="nw">{esc(dtype)}</td><td class="num">{esc(fmt_num(v.get("elements")))}</td>'
            + "".join(f'<td class="num">{_le(v.get(k))}</td>' for k in ("p50_u", "p90_u", "p99_u"))
            + f'<td class="num">{esc(fmt_num(v.get("max_u")))}</td>'
            f'<td class="num">{esc(fmt_num(w.get("worst_u")))}</td><td class="num">{esc(fmt_num(w.get("bound_u")))}</td>'
            f'<td class="nw">{_pct_bar(ratio)}</td></tr>')
    over = sum(1 for r in rows if math.isnan(r[0]) or r[0] > 1.0)
    worst = rows[0]
    head = (f"{len(rows)} op/property/dtype rows; " + (f"{over} OVER THE MODEL BOUND" if over else
            f"closest to its bound: {worst[1]} {worst[3]} at {fmt_num(worst[0] * 100)} %"))
    return (f'<section id="table-ops_error_u"><h3>{title}</h3><p><span class="pill {"bad" if over else "ok"}">'
            f'{esc(head)}</span></p>{OPS_LEAD}<table class="grid"><thead><tr><th>op</th><th>property</th>'
            "<th>dtype</th><th>elements</th><th>p50 (u)</th><th>p90 (u)</th><th>p99 (u)</th><th>max (u)</th>"
            "<th>tightest: error (u)</th><th>its bound (u)</th><th>error / bound</th></tr></thead>"
            f'<tbody>{"".join(body)}</tbody></table></section>')


def cosine_lies_section(value: Any) -> str:
    title = "Cosine similarity lies: a witness"
    if not isinstance(value, dict) or "cosine" not in value:
        return f'<section id="table-cosine_lies"><h3>{title}</h3>{generic(value)}</section>'
    cos = as_float(value.get("cosine"))  # 4 decimals: near 1, three significant digits hide the point
    stats = [("cosine similarity of the logits", f"{cos:.4f}" if math.isfinite(cos) else fmt_num(cos), "looks identical"),
             ("top-5 tokens in common", f"{fmt_num(value.get('top5_overlap'))} of 5", "nothing in common"),
             ("KL(p‖q) of the softmaxes", f"{fmt_num(value.get('kl_nats'))} nats", "completely different"),
             ("max |Δ logit|", fmt_num(value.get("max_abs_logit_diff")), "")]
    tiles = "".join(f'<div class="tile"><div class="big">{esc(v)}</div><div>{esc(label)}</div>'
                    f'<div class="muted">{esc(gloss)}</div></div>' for label, v, gloss in stats)
    recipe = value.get("recipe")
    tops = "".join(f"<li><b>{esc(k)}</b> {inline(value[k])}</li>" for k in ("top5_a", "top5_b") if k in value)
    rest = {k: v for k, v in value.items() if k not in {"recipe", "cosine", "top5_overlap", "kl_nats",
                                                       "max_abs_logit_diff", "top5_a", "top5_b"}}
    return (f'<section id="table-cosine_lies"><h3>{title}</h3><div class="lies"><p>Two logit vectors whose '
            "cosine similarity is above 0.99, the usual “the outputs match” threshold, yet whose top-5 tokens "
            "are disjoint: cosine on logits is dominated by a shared offset and says nothing about which "
            "tokens get sampled. Compare distributions (KL, top-k overlap) instead.</p>"
            f'<div class="tiles">{tiles}</div><ul>{tops}</ul>'
            + (f"<p><b>recipe</b> {inline(recipe)}</p>" if recipe is not None else "")
            + (f"<p>{inline(rest)}</p>" if rest else "") + "</div></section>")
