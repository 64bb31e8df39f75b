"""Engines' own sampling rules (vLLM's exponential race, candle's Gumbel-max) against the law each
should sample, from the ``engine_sampling_rules`` table: one row per (rule, logits), plus any
witness rows (no sample count) shown as key/value lines."""
from __future__ import annotations

from typing import Any

from reports.tables import esc, fmt_num, generic, inline, truncate

LEAD = ('<p class="muted">Each rule is drawn N times through the implementation and judged by the calibrated '
        "χ² gate against the law it should follow (the softmax; for candle, its truncated-Gumbel law). "
        "<i>same token as inverse-CDF</i>: the fraction of shared uniforms on which the rule picks the token "
        "llama.cpp's inverse-CDF draw picks: the rules sample the same distribution, not the same token for "
        "a seed (data, not a failure). candle clips its Gumbel noise, so its law is not the softmax: "
        "<i>law TVD to softmax</i> is that exact distance, and <i>gate vs softmax</i> says whether the χ² gate "
        "alone would see it (FAIL here is the expected finding, not a test failure).</p>")
COLUMNS = (("N", "N"), ("p_value", "gate p"), ("tvd", "sample TVD"), ("passed", "gate"),
           ("same_token_as_inverse_cdf", "same token as inverse-CDF"), ("law_tvd_to_softmax", "law TVD to softmax"),
           ("gate_against_softmax", "gate vs softmax"), ("unreachable_tokens", "unreachable tokens"))


def _verdict(v: Any) -> str:
    if isinstance(v, bool):
        return '<span class="ok">pass</span>' if v else '<span class="bad">FAIL</span>'
    if isinstance(v, str):
        word = v.split(":", 1)[0].strip()
        cls = "bad" if word.upper().startswith("FAIL") else "ok"
        return (f'<span class="{cls}" title="{esc(truncate(v, 1500))}">{esc(truncate(word, 24))}</span>'
                f'<div class="emsub">{esc(truncate(v.partition(":")[2].strip(), 600))}</div>')
    return esc(fmt_num(v))


def sampling_rules_section(value: Any) -> str:
    title = "Engine sampling rules: exponential race and Gumbel-max"
    if not isinstance(value, dict) or not value:
        return f'<section id="table-engine_sampling_rules"><h3>{title}</h3>{generic(value)}</section>'
    rows, other = [], []
    for key, v in value.items():
        (rows if isinstance(v, dict) and "N" in v else other).append((str(key), v))
    cols = [(k, label) for k, label in COLUMNS if any(k in v for _, v in rows)]
    body = []
    for key, v in rows:
        rule, _, case = key.partition(":")
        tds = "".join(f'<td{" class=nw" if k == "passed" else "" if k == "gate_against_softmax" else " class=num"}>'
                      f'{_verdict(v.get(k)) if k in ("gate_against_softmax", "passed") else esc(fmt_num(v.get(k)))}</td>'
                      for k, _ in cols)
        cls = ' class="bad"' if v.get("passed") is False else ""
        body.append(f'<tr{cls}><td class="nw">{esc(rule)}</td><td class="nw">{esc(case)}</td>{tds}</tr>')
    head = "".join(f"<th>{esc(label)}</th>" for _, label in cols)
    table = (f'<table class="grid"><thead><tr><th>rule</th><th>logits family / vocab / T</th>{head}</tr></thead>'
             f'<tbody>{"".join(body)}</tbody></table>') if body else ""
    extra = "".join(f'<p><b>{esc(k)}</b>: {inline(v)}</p>' for k, v in other)
    return f'<section id="table-engine_sampling_rules"><h3>{title}</h3>{LEAD}{table}{extra}</section>'
