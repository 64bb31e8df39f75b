"""The cross-engine conformance matrix: engine pairs × user settings, each cell coloured by the
largest total variation distance found between the two engines' sampling distributions, labelled
with the known intended difference, with the shrunk witness on hover and tabled in full below.

Reads ``engine_matrix`` (cells with witnesses) and, as a fallback or for pairs the cells lack,
``engine_matrix_max_tvd`` ({"A vs B": {setting: tvd | "same" | "n/a"}}). Nothing is recomputed."""
from __future__ import annotations

import math
import re
from typing import Any

from reports.tables import as_float, compact_json, esc, fmt_num, generic, runs, truncate

# ColorBrewer "Reds" (a perceptually ordered sequential scale) without its near-white first step,
# so the faintest difference still reads as red next to the green "same"
REDS = ("#fee0d2", "#fcbba1", "#fc9272", "#fb6a4a", "#ef3b2c", "#cb181d", "#a50f15", "#67000d")
TVD_FLOOR = 1e-3  # the scale is logarithmic over [1e-3, 1], fixed so pages compare across runs
LEGEND = (0.001, 0.003, 0.01, 0.03, 0.1, 0.3, 1.0)
# sampler parameters at which the sampler is off: the column header shows only the others
NEUTRAL = {"top_k": "0", "top_p": "1.0", "min_p": "0.0", "typical_p": "1.0", "epsilon": "0.0", "eta": "0.0",
           "repetition_penalty": "1.0", "presence_penalty": "0.0", "frequency_penalty": "0.0", "prompt": "()",
           "output": "()", "min_tokens_to_keep": "1", "repeat_last_n": "64"}

LEAD = """<p class="lead">Each row is a pair of inference engines, each column one user setting typed
into both (the same temperature, top_k, top_p, min_p, repetition penalty). For every cell hypothesis
searched for a logits row (and a token history) on which the two engines' sampling distributions
differ. <b class="ok">same</b>: no difference in any example drawn. A red cell: they differ; the number
is the largest <i>total variation distance</i> found (TVD = ½Σ|p−q|, the most by which the two engines
disagree on the probability of any set of tokens; deeper red = larger), and beneath it the known,
intended semantic difference that explains it. <b>n/a</b>: one engine has no such sampler. Hover a cell
for its minimal witness; click it for the witness table. To answer “why does vLLM not match
llama.cpp?”, read the row <i>llama.cpp ↔ vllm</i>.</p>"""


def tvd_colour(tvd: float) -> tuple[str, str]:
    """(background, text colour) for a TVD > 0 on the fixed log scale."""
    if math.isnan(tvd):
        return "#fff2d6", "#6b4a00"
    pos = min(max((math.log10(max(tvd, TVD_FLOOR)) - math.log10(TVD_FLOOR)) / -math.log10(TVD_FLOOR), 0.0), 1.0)
    x = pos * (len(REDS) - 1)
    i = min(int(x), len(REDS) - 2)
    a, b = (tuple(int(c[k:k + 2], 16) for k in (1, 3, 5)) for c in (REDS[i], REDS[i + 1]))
    rgb = "#" + "".join(f"{round(p + (q - p) * (x - i)):02x}" for p, q in zip(a, b))
    return rgb, ("#fff" if pos > 0.55 else "#3a0a06")


def _cells(tables: dict[str, Any]) -> list[dict[str, Any]]:
    em = tables.get("engine_matrix")
    cells = [dict(c) for c in (em.get("cells") if isinstance(em, dict) else None) or [] if isinstance(c, dict)]
    have = {(str(c.get("a")), str(c.get("b")), str(c.get("setting"))) for c in cells}
    mt = tables.get("engine_matrix_max_tvd")
    for pair, row in (mt.items() if isinstance(mt, dict) else ()):
        a, _, b = str(pair).partition(" vs ")
        for setting, v in (row.items() if isinstance(row, dict) else ()):
            if (a, b, str(setting)) not in have:
                rel = v if v in ("same", "n/a") else "differs"
                cells.append({"a": a, "b": b, "setting": str(setting), "relation": rel,
                              "max_tvd": 0.0 if rel == "same" else (as_float(v) if rel == "differs" else None)})
    return cells


def _settings(tables: dict[str, Any], cells: list[dict[str, Any]]) -> dict[str, str]:
    em = tables.get("engine_matrix")
    s = em.get("settings") if isinstance(em, dict) else None
    out = {str(k): str(v) for k, v in s.items()} if isinstance(s, dict) else {}
    for c in cells:
        out.setdefault(str(c.get("setting")), "")
    return out


def _params(text: str) -> str:
    """``Settings(temperature=0.8, top_k=40, …)`` → ``temperature 0.8 · top_k 40`` (non-neutral only)."""
    pairs = re.findall(r"(\w+)=(\([^)]*\)|[^,()]+)", text)
    return " · ".join(f"{k} {v.strip()}" for k, v in pairs if NEUTRAL.get(k) != v.strip())


def _why(c: dict[str, Any]) -> list[str]:
    w = c.get("why")
    return [str(x) for x in w] if isinstance(w, (list, tuple)) else ([str(w)] if w else [])


def _tvd(c: dict[str, Any]) -> float:
    """The cell's headline TVD: the largest found, else its witness's."""
    if c.get("max_tvd") is not None:
        return as_float(c.get("max_tvd"))
    w = c.get("witness")
    return as_float(w.get("tvd") if isinstance(w, dict) else None)


def _tooltip(c: dict[str, Any]) -> str:
    a, b = c.get("a"), c.get("b")
    lines = [f"{a} vs {b} @ {c.get('setting')}: {c.get('relation')}"]
    if c.get("relation") == "differs":
        lines[0] += f", largest TVD found {fmt_num(_tvd(c))}"
    lines += [f"why: {w}" for w in _why(c)]
    if c.get("note"):
        lines.append(f"note: {c['note']}")
    w = c.get("witness")
    if isinstance(w, dict):
        lines.append(f"witness (TVD {fmt_num(w.get('tvd'))}): logits {runs(w.get('logits'))}")
        if w.get("history"):
            lines.append(f"history {runs(w.get('history'))}")
        for e in (a, b):
            lines.append(f"{e}: keeps {runs(w.get(f'kept:{e}'), ranges=True)}; p {runs(w.get(f'p:{e}'))}")
    return truncate("\n".join(lines), 1500)


def _cell_html(c: dict[str, Any] | None, anchor: str | None, seen: set[str]) -> str:
    """One grid cell. Labels already shown to the left in the row are folded into a count, so the
    combined-settings column shows only what is new there."""
    if c is None:
        return '<td class="em untested">·</td>'
    rel = str(c.get("relation"))
    tip = esc(_tooltip(c))
    if rel == "same":
        note = f'<div class="emnote">predicted difference not found</div>' if c.get("note") else ""
        n = f'<div class="emsub">{esc(fmt_num(c.get("examples")))} examples</div>' if c.get("examples") else ""
        return f'<td class="em same" title="{tip}"><div class="emtvd">same</div>{n}{note}</td>'
    if rel != "differs":
        return (f'<td class="em na" title="{tip}"><div class="emtvd">{esc(rel)}</div>'
                f'<div class="emsub">{esc("; ".join(_why(c)))}</div></td>')
    bg, fg = tvd_colour(_tvd(c))
    new = [w for w in _why(c) if w not in seen]
    why = "".join(f"<li>{esc(w)}</li>" for w in new)
    if len(new) < len(_why(c)):
        why += f'<li class="emmore">+ {len(_why(c)) - len(new)} shown to the left</li>'
    seen.update(new)
    flag = "" if c.get("intended") is not False and (why or "intended" not in c) else \
        '<div class="emflag">UNEXPLAINED</div>'
    body = f'<div class="emtvd">{esc(fmt_num(_tvd(c)))}</div>{flag}' + (f'<ul class="emwhy">{why}</ul>' if why else "")
    if anchor:
        body = f'<a href="#{anchor}" style="color:inherit;text-decoration:none">{body}</a>'
    return f'<td class="em differs" style="background:{bg};color:{fg}" title="{tip}">{body}</td>'


def _legend() -> str:
    sw = ['<span class="sw" style="background:#e5f4e8;color:#1e6b2f">same</span>']
    for t in LEGEND:
        bg, fg = tvd_colour(t)
        sw.append(f'<span class="sw" style="background:{bg};color:{fg}">{esc(fmt_num(t))}</span>')
    sw.append('<span class="sw na">n/a</span>')
    return (f'<div class="emlegend">TVD: {"".join(sw)} '
            '<span class="muted">(log scale; ≤ 0.001 shown as 0.001)</span></div>')


def _witness_rows(witnessed: list[tuple[str, dict[str, Any]]]) -> str:
    rows = []
    for anchor, c in witnessed:
        w = c["witness"] if isinstance(c.get("witness"), dict) else {}
        a, b = str(c.get("a")), str(c.get("b"))
        ka, kb = w.get(f"kept:{a}"), w.get(f"kept:{b}")
        diff = ""
        if isinstance(ka, list) and isinstance(kb, list):
            def only(x: list, y: list) -> list[str]:  # token ids in x but not y, in numeric order
                return [str(t) for t in sorted(set(map(str, x)) - set(map(str, y)), key=lambda t: (len(t), t))]
            only_a, only_b = only(ka, kb), only(kb, ka)
            diff = "; ".join(f"only {e}: {', '.join(o[:12])}{' …' if len(o) > 12 else ''}"
                             for e, o in ((a, only_a), (b, only_b)) if o) or "same tokens"
        worst = c.get("max_tvd_case")
        worst_html = ""
        if isinstance(worst, dict):
            worst_html = (f'<details><summary>largest-TVD case ({esc(fmt_num(_tvd(c)))})</summary><span class="inline">'
                          f'<b>logits</b> {esc(runs(worst.get("logits")))}'
                          + (f'; <b>history</b> {esc(runs(worst.get("history")))}' if worst.get("history") else "")
                          + "</span></details>")
        extra = {k: v for k, v in w.items()
                 if k not in ("logits", "history", "tvd") and not str(k).startswith(("kept:", "p:"))}
        extra_html = f'<div class="inline">{esc(truncate(compact_json(extra), 400))}</div>' if extra else ""
        hist = f'<div class="inline"><b>history</b> {esc(runs(w.get("history")))}</div>' if w.get("history") else ""
        rows.append(
            f'<tr id="{anchor}"><td class="nw">{esc(a)} ↔ {esc(b)}</td><td>{esc(c.get("setting"))}</td>'
            f'<td>{"<br>".join(esc(x) for x in _why(c)) or _none_recorded()}</td>'
            f'<td class="num">{esc(fmt_num(w.get("tvd")))}<div class="emsub">max {esc(fmt_num(_tvd(c)))}</div></td>'
            f'<td><span class="inline">{esc(runs(w.get("logits")))}</span>{hist}{worst_html}{extra_html}</td>'
            f'<td><span class="inline"><b>{esc(a)}</b> {esc(runs(ka, ranges=True))}<br><b>{esc(b)}</b> '
            f'{esc(runs(kb, ranges=True))}</span><div class="emsub">{esc(diff)}</div></td>'
            f'<td><span class="inline"><b>{esc(a)}</b> {esc(runs(w.get(f"p:{a}")))}<br><b>{esc(b)}</b> '
            f'{esc(runs(w.get(f"p:{b}")))}</span></td></tr>')
    return "".join(rows)


def _none_recorded() -> str:
    return '<span class="bad">none recorded</span>'


def engine_matrix_section(tables: dict[str, Any]) -> str:
    cells = _cells(tables)
    if not cells:
        value = {k: tables[k] for k in ("engine_matrix", "engine_matrix_max_tvd") if k in tables}
        return f'<section id="engine-matrix"><h3>Cross-engine conformance matrix</h3>{generic(value)}</section>'
    settings = _settings(tables, cells)
    em = tables.get("engine_matrix") if isinstance(tables.get("engine_matrix"), dict) else {}
    engines = [str(e) for e in em.get("engines") or []]
    pairs: list[tuple[str, str]] = []
    for c in cells:
        p = (str(c.get("a")), str(c.get("b")))
        if p not in pairs:
            pairs.append(p)
    real = {str(k): str(v) for k, v in (em.get("real") or {}).items()} if isinstance(em.get("real"), dict) else {}
    rank = {e: i for i, e in enumerate(engines)}
    pairs.sort(key=lambda p: (rank.get(p[0], len(rank)), rank.get(p[1], len(rank))))
    by = {(str(c.get("a")), str(c.get("b")), str(c.get("setting"))): c for c in cells}

    witnessed = [(f"em-w-{i}", c) for i, c in enumerate(cells) if isinstance(c.get("witness"), dict)]
    anchor_of = {id(c): a for a, c in witnessed}
    head = "".join(f'<th title="{esc(v)}">{esc(k)}<div class="emsub">{esc(_params(v))}</div></th>'
                   for k, v in settings.items())
    body = []
    for a, b in pairs:
        row = [by.get((a, b, s)) for s in settings]
        seen: set[str] = set()
        tds = "".join(_cell_html(c, anchor_of.get(id(c)) if c else None, seen) for c in row)
        diffs = [_tvd(c) for c in row if c and c.get("relation") == "differs"]
        if diffs:
            top = max(diffs, key=lambda t: -1.0 if math.isnan(t) else t)
            bg, fg = tvd_colour(top)
            worst = (f'<td class="em differs" style="background:{bg};color:{fg}">'
                     f'<div class="emtvd">{esc(fmt_num(top))}</div></td>')
        elif any(c and c.get("relation") == "same" for c in row):
            worst = '<td class="em same"><div class="emtvd">same</div></td>'
        else:
            worst = '<td class="em na"><div class="emtvd">n/a</div></td>'
        body.append(f'<tr><th class="rowh">{_engine(a, real)} ↔ {_engine(b, real)}</th>{tds}{worst}</tr>')
    grid = (f'<table class="engm"><thead><tr><th>engines</th>{head}<th>largest TVD<div class="emsub">any setting</div>'
            f'</th></tr></thead><tbody>{"".join(body)}</tbody></table>')

    rels = [str(c.get("relation")) for c in cells]
    counts = ", ".join(f"{rels.count(r)} {r}" for r in ("same", "differs", "n/a") if r in rels)
    unexplained = [c for c in cells if c.get("relation") == "differs" and (c.get("intended") is False or
                                                                           ("why" in c and not _why(c)))]
    alarm = (f'<p class="note bad">{len(unexplained)} difference(s) have no known explanation: a variant bug or '
             "an unlabelled engine difference (see the witness table).</p>") if unexplained else ""
    wtable = (f'<h4>Witnesses ({len(witnessed)})</h4><p class="muted">The shrunk (minimal) example hypothesis '
              "found for each differing cell: its logits (<code>v×n</code> = n equal values), the tokens each "
              "engine keeps (<code>a–b</code> = a range) and both final distributions. The witness TVD is the "
              "minimal example's; “max” is the largest the targeted search reached (its case is under "
              "“largest-TVD case”).</p>"
              '<table class="grid emw"><thead><tr><th>engines</th><th>setting</th><th>known difference</th>'
              "<th>TVD</th><th>logits</th><th>kept tokens</th><th>distributions</th></tr></thead>"
              f"<tbody>{_witness_rows(witnessed)}</tbody></table>") if witnessed else ""
    real_note = ('<p class="muted">Real columns (<b>●</b>): the variant is judged against the real engine at its '
                 "pinned release, so its cells are that engine's behaviour: "
                 + "; ".join(f"<b>{esc(e)}</b>: {esc(v)}" for e, v in real.items()) + ".</p>") if real else ""
    return (f'<section id="engine-matrix"><h3>Cross-engine conformance matrix ({len(pairs)} pairs × '
            f'{len(settings)} settings; {esc(counts)})</h3>{LEAD}{real_note}{_legend()}{alarm}{grid}{wtable}</section>')


def _engine(name: str, real: dict[str, str]) -> str:
    """An engine's name in a row header; ● marks a column backed by the real engine."""
    return f'{esc(name)} <span title="{esc(real[name])}">●</span>' if name in real else esc(name)
