"""The report's calibration sections (``reports/calibration.py``): the conforming false-alarm
table, the near-threshold kill table and the two grades, drawn from recorded tables, with
their headline counts computed from the rows, escaped, and never raising on odd tables."""
from __future__ import annotations

import pytest

from reports.render import render

CONFORMING = [{"member": "llama_cpp_cpu", "record": "top_p", "properties": 9, "examples": 40, "false_alarms": 0, "first": ""},
              {"member": "cuda_block", "record": "dist", "properties": 3, "examples": 12, "false_alarms": 1,
               "first": "impl_vs_oracle[dist/float32] (example 2): <b>selected 61</b>"}]
NEAR = [{"mutant": "top_p_one_ulp_up", "domain": "samplers", "size": "1 ulp", "killed": True, "examples_to_kill": 1,
         "examples_run": 1, "killed_by": "impl_vs_oracle[top_p/float32]", "control_fails_too": False, "why": "kept 2"},
        {"mutant": "dist_bf16_probs", "domain": "samplers", "size": "2^-9", "killed": True, "examples_to_kill": 5,
         "examples_run": 5, "killed_by": "impl_vs_oracle[dist/float32]", "control_fails_too": False, "why": ""},
        {"mutant": "matmul_tf32_inputs", "domain": "ops", "size": "2^-11", "killed": False, "examples_to_kill": None,
         "examples_run": 40, "killed_by": None, "control_fails_too": False, "why": ""}]
ROBUST = [{"section": "bad input", "subject": "top_k", "checked": 5, "held": 4, "first_miss": "nan row", "pass_rate": 0.8},
          {"section": "bad input", "subject": "ops: empty", "checked": 1, "held": 1, "first_miss": "", "pass_rate": 1.0},
          {"section": "outside the domain", "subject": "rms_norm", "checked": 4, "held": 1,
           "first_miss": "huge row: inf", "pass_rate": 0.25}]


def _section(anchor: str, tables: dict) -> str:
    page = render({"meta": {}, "tests": [], "tables": tables})
    i = page.index(f'<section id="{anchor}"')
    return page[i:page.index("</section>", i)]


def test_conforming_section_counts_false_alarms_and_escapes():
    html = _section("calibration-conforming", {"calibration_conforming": CONFORMING})
    assert "1 false alarm(s) over 2 (member, record) pairs, 2 member(s)" in html
    assert 'class="bad"' in html and "<b>" not in html and "&lt;b&gt;" in html


def test_near_section_gives_kill_rate_and_examples_to_kill():
    html = _section("calibration-near", {"calibration_near": NEAR})
    assert "2 of 3 killed (67 %); median examples-to-kill 5" in html
    assert "Survived" in html and "matmul_tf32_inputs" in html


def test_grades_are_separate_sections_with_their_own_pass_rate():
    tables = {"robustness": ROBUST}
    bad, dom = _section("grade-bad-input", tables), _section("grade-domain", tables)
    assert "5 of 6 held (83.3 %)" in bad and "rms_norm" not in bad
    assert "1 of 4 held (25.0 %)" in dom and "top_k" not in dom


def test_absent_tables_say_not_run():
    page = render({"meta": {}, "tests": [], "tables": {}})
    for anchor in ("calibration-conforming", "calibration-near", "grade-bad-input", "grade-domain"):
        i = page.index(f'<section id="{anchor}"')
        assert "not run" in page[i:page.index("</section>", i)]


@pytest.mark.parametrize("tables", [{"calibration_conforming": "x"}, {"calibration_near": [1, {"killed": "yes"}]},
                                    {"robustness": {"a": 1}}, {"robustness": [{"section": "bad input", "checked": "?"}]}])
def test_sections_survive_odd_tables(tables):
    page = render({"meta": {}, "tests": [], "tables": tables})
    assert "could not be drawn" not in page
