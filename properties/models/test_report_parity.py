"""The report's whole-model parity section: rendered from recorded tables, escaped, and robust
to missing or malformed entries (it draws what is there and never raises)."""
from __future__ import annotations

import pytest

from reports.render import render

PARITY = {"llama-F32": {
    "llama.cpp vs oracle": {"mean_kld": 1e-13, "max_kld": 3e-13, "kld_bound": 2e-9, "same_top1": 1.0,
                            "may_differ_positions": 0, "max_abs_dlogit": 2e-6, "dlogit_bound": 3e-4,
                            "cosine_min": 0.99999, "cosine_misleading": True,
                            "layer_rel_err": {"l_out-0": 3e-7, "l_out-1": 3e-7, "result_norm": 4e-7}},
    "gpu_impl float32 vs oracle": {"max_abs_dlogit": 5e-4, "dlogit_bound": 3e-4,
                                   "layer_rel_err": {"attn_norm-0": 1e-7, "l_out-0": 4e-7, "l_out-1": 5e-7}}},
    "llama-Q4_K": {"KLD vs F32 twin": {"oracle": 2e-3, "llama.cpp": 2.3e-3}}}
MUTANTS = {"no_causal_mask": {"bug": "<script>x</script>", "verdict": "diverges", "first tensor": "kqv_out-0",
                              "op": "attention", "detail": "relative error 0.96"}}


def _section(tables: dict) -> str:
    page = render({"meta": {}, "tests": [], "tables": tables})
    i = page.index('<section id="model-parity">')
    return page[i:page.index("</section>", i)]


def test_parity_section_shows_fixtures_bounds_and_mutants():
    html = _section({"model_parity": PARITY, "model_mutants": MUTANTS})
    assert "llama-F32" in html and "llama-Q4_K" in html and "misleading" in html
    assert 'class="num bad"' in html  # gpu_impl's 5e-4 over its 3e-4 bound is flagged
    assert "<svg" in html and "<circle" in html and "kqv_out-0" in html  # the per-tensor plot is drawn
    assert "<script>" not in html and "&lt;script&gt;" in html


@pytest.mark.parametrize("tables", [{"model_parity": {}}, {"model_parity": [1, 2]}, {"model_mutants": "x"},
                                    {"model_parity": {"odd": 3, "llama-F32": {"llama.cpp vs oracle": "?"}}},
                                    {"model_parity": {"a-F32": {"llama.cpp vs oracle": {
                                        "layer_rel_err": {"l_out-0": "nan"}}}}}])
def test_parity_section_survives_odd_tables(tables):
    assert "Whole-model parity" in _section(tables)
