"""Meta: the report renders every table kind from results.json into one self-contained, escaped
HTML page, and ``logitcheck report --from-results`` writes it."""
from __future__ import annotations

import json
import math
import re
from html.parser import HTMLParser

import pytest

from reports.cli import main
from reports.render import render

EVIL = '<script>alert("x")</script>'


def worst(record: str, dtype: str, worst_u: float, bound_u: float, ratio: float) -> dict:
    return {"record": record, "property": "impl_vs_oracle", "dtype": dtype, "worst_u": worst_u,
            "bound_u": bound_u, "ratio": ratio}


def synthetic_results() -> dict:
    return {
        "meta": {"impl": "gpu_impl", "backend": "numpy", "profile": "ci", "numpy": "2.4.0",
                 "not_covered": ["gpu_impl.mirostat", "gpu_impl.dry"], "seed": 7, "date": "2025-01-01T00:00:00+00:00",
                 "pytest_exit": 1, "versions": {"python": "3.11", "numpy": "2.4.0"}},
        "tests": [
            {"nodeid": "properties/test_impl_vs_oracle.py::test_impl_matches_oracle[top_k-float32]",
             "outcome": "passed", "duration": 0.5, "reason": ""},
            {"nodeid": "properties/test_impl_vs_oracle.py::test_impl_matches_oracle[top_p-float16]",
             "outcome": "failed", "duration": 1.25,
             "reason": "AssertionError: dropped 2 token(s) " + EVIL + " " + "x" * 5000 + " TAIL-OF-TRACE"},
            {"nodeid": "properties/test_impl_vs_oracle.py::test_impl_matches_oracle[mirostat-float32]",
             "outcome": "skipped", "duration": 0.0, "reason": "NOT COVERED: mirostat is not implemented in gpu_impl"},
        ],
        "worst_error": [
            worst("top_k", "float32", 3.0, 40.0, 0.075),
            worst("top_p", "float16", math.inf, 12.0, math.inf),
            worst("softmax", "bfloat16", math.nan, 9.0, math.nan),
            worst("temp", "float32", 0.0, 2.0, 0.0),
        ],
        "examples": [{"record": "top_k", "property": "impl_vs_oracle", "count": 40},
                     {"record": "greedy", "property": "argmax_exact", "count": 25}],
        "tables": {
            "order_matrix": {"samplers": ["top_k", "top_p", "temp"], "cells": [
                {"first": "top_k", "second": "top_p", "relation": "differs", "tvd": 0.31,
                 "witness": {"logits": [1.0, 2.0], "note": EVIL, "id": "WITNESS-TK-TP"}},
                {"first": "top_k", "second": "temp", "relation": "commute", "witness": None, "tvd": None,
                 "why": "temp keeps the order <b>"},
                {"first": "temp", "second": "top_p", "relation": "untested", "witness": None, "tvd": None}]},
            "zoo": [{"mutant": "topk_off_by_one", "description": "keeps k+1", "killed": True,
                     "examples_to_kill": 3, "killed_by": "impl_vs_oracle"},
                    {"mutant": "softmax_no_max_shift", "description": "overflows", "killed": False,
                     "examples_to_kill": None, "killed_by": ""}],
            "quant_zoo": [{"mutant": "q4_0_wrong_scale", "killed": True, "examples_to_kill": 1,
                           "killed_by": "dequant"}],
            # the ops zoo records {mutant: {...}} with examples_to_kill and no "killed" field
            "ops_zoo": {"rmsnorm_no_eps": {"bug": "rms_norm without eps", "examples_to_kill": 2,
                                           "property": "impl_vs_oracle[rms_norm]"}},
            "llama_cpp_findings": [{"sampler": "top_n_sigma", "finding": "FINDING-NSIGMA", "witness": EVIL}],
            "stats_gate": {"alpha": 1e-6, "trials": 2000, "false_failures": 0, "per_test": {"dist": 1e-7}},
            "engine_matrix": {"oddly": ["shaped", 1, math.nan]},
            "weird_scalar": 42,
            "ops_error_u": {"rmsnorm|impl_vs_oracle|float32": {"elements": 4096, "max_u": 2.5},
                            "softmax|impl_vs_oracle|float16": {"elements": 512, "max_u": math.inf}},
        },
    }


class Tags(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


@pytest.fixture(scope="module")
def page() -> str:
    return render(synthetic_results())


def test_one_self_contained_document(page):
    assert page.lstrip().lower().startswith("<!doctype html>")
    assert page.count("<html") == 1 and page.count("</html>") == 1
    p = Tags()
    p.feed(page)
    refs = [a.get(k) or "" for _, a in p.tags for k in ("src", "href")]
    assert not [r for r in refs if re.match(r"\s*(https?:)?//", r)], "external resource reference"
    assert all(r.startswith(("#", "data:image/png;base64,")) for r in refs if r)
    assert "url(" not in page and "@import" not in page
    assert not [t for t, _ in p.tags if t in ("script", "link", "iframe")]


def test_data_is_escaped(page):
    assert "<script" not in page
    assert "&lt;script&gt;" in page


def test_every_record_and_table_is_shown(page):
    for rec in ("top_k", "top_p", "softmax", "temp", "greedy"):
        assert re.search(rf"<td[^>]*>{rec}</td>", page), rec
    for mutant in ("topk_off_by_one", "softmax_no_max_shift", "q4_0_wrong_scale", "rmsnorm_no_eps"):
        assert mutant in page
    assert "1 SURVIVED" in page and "Bug zoo: op mutants (1 of 1 killed)" in page
    assert "WITNESS-TK-TP" in page and 'title="top_k then top_p vs top_p then top_k: differs (tvd 0.31)' in page
    assert "FINDING-NSIGMA" in page and "false_failures" in page and "weird_scalar" in page
    assert "gpu_impl.mirostat" in page and "NOT COVERED (2)" in page
    assert "why: temp keeps the order &lt;b&gt;" in page
    # a dict of flat dicts becomes one table keyed by its keys
    assert "<th>key</th><th>elements</th><th>max_u</th>" in page and ">rmsnorm|impl_vs_oracle|float32</td>" in page


def test_failure_is_prominent_and_truncated(page):
    assert "1 test FAILED" in page
    assert "test_impl_matches_oracle[top_p-float16]" in page
    assert "more characters]" in page and "TAIL-OF-TRACE" not in page
    assert "∞" in page and "NaN" in page


def test_plot_is_inlined(page):
    pytest.importorskip("matplotlib")
    assert 'src="data:image/png;base64,' in page


def test_odd_shapes_do_not_crash():
    for tables in ({"order_matrix": [1, 2]}, {"zoo": {"a": 1}}, {"order_matrix": {"cells": {"a|b": "differs"}}},
                   {"stats_gate": None}, {}):
        assert "</html>" in render({"tables": tables, "tests": [{"outcome": "passed"}], "worst_error": [{"x": 1}]})
    with pytest.raises(ValueError):
        render([])  # type: ignore[arg-type]


def test_cli_renders_existing_results(tmp_path, capsys):
    src = tmp_path / "results.json"
    src.write_text(json.dumps(synthetic_results()))
    out = tmp_path / "out"
    assert main(["report", "--from-results", str(src), "--out", str(out)]) == 0
    html = (out / "index.html").read_text(encoding="utf-8")
    assert "WITNESS-TK-TP" in html and "<script" not in html
    printed = capsys.readouterr().out
    assert str((out / "index.html").resolve()) in printed and "1 FAILED" in printed
    assert main(["report", "--from-results", str(src), "--out", str(out), "--strict"]) == 1
    assert main(["report", "--from-results", str(tmp_path / "missing.json"), "--out", str(out)]) == 2
