"""Meta: the report renders every table kind from results.json into one self-contained, escaped
HTML page, and ``logitcheck report --from-results`` writes it."""
from __future__ import annotations

import json
import math
import re
from html.parser import HTMLParser

import pytest

from reports.cli import main
from reports.engine_matrix import tvd_colour
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
            {"nodeid": "properties/samplers/test_impl_vs_oracle.py::test_impl_matches_oracle[top_k-float32]",
             "outcome": "passed", "duration": 0.5, "reason": ""},
            {"nodeid": "properties/samplers/test_impl_vs_oracle.py::test_impl_matches_oracle[top_p-float16]",
             "outcome": "failed", "duration": 1.25,
             "reason": "AssertionError: dropped 2 token(s) " + EVIL + " " + "x" * 5000 + " TAIL-OF-TRACE"},
            {"nodeid": "properties/samplers/test_impl_vs_oracle.py::test_impl_matches_oracle[mirostat-float32]",
             "outcome": "skipped", "duration": 0.0, "reason": "NOT COVERED: mirostat is not implemented in gpu_impl"},
        ],
        "worst_error": [
            worst("top_k", "float32", 3.0, 40.0, 0.075),
            worst("top_p", "float16", math.inf, 12.0, math.inf),
            worst("softmax", "bfloat16", math.nan, 9.0, math.nan),
            worst("temp", "float32", 0.0, 2.0, 0.0),
            {"record": "rms_norm", "property": "impl_vs_oracle[rms_norm]", "dtype": "float32", "worst_u": 4.05,
             "bound_u": 13.5, "ratio": 0.3},
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
            "zoo_samplers": [{"mutant": "topk_off_by_one", "description": "keeps k+1", "killed": True,
                     "examples_to_kill": 3, "killed_by": "impl_vs_oracle"},
                    {"mutant": "softmax_no_max_shift", "description": "overflows", "killed": False,
                     "examples_to_kill": None, "killed_by": ""}],
            "zoo_quants": [{"mutant": "q4_0_wrong_scale", "killed": True, "examples_to_kill": 1,
                           "killed_by": "dequant"}],
            # a zoo may record {mutant: {...}} with examples_to_kill and no "killed" field
            "zoo_ops": {"rmsnorm_no_eps": {"bug": "rms_norm without eps", "examples_to_kill": 2,
                                           "property": "impl_vs_oracle[rms_norm]"}},
            "llama_cpp_findings": [{"sampler": "top_n_sigma", "finding": "FINDING-NSIGMA", "witness": EVIL}],
            "stats_gate": {"alpha": 1e-6, "trials": 2000, "false_failures": 0, "per_test": {"dist": 1e-7}},
            "weird_scalar": 42,
            "peer_stats": {"rmsnorm|impl_vs_oracle|float32": {"elements": 4096, "max_u": 2.5},
                           "softmax|impl_vs_oracle|float16": {"elements": 512, "max_u": math.inf}},
            **engine_tables(), **ops_tables(),
        },
    }


def engine_tables() -> dict:
    """Two engines and a third named like markup; one explained difference with its witness, one
    unexplained with NaN TVDs, one n/a, and a pair known only from engine_matrix_max_tvd."""
    w = {"logits": [3.5] * 41, "history": [], "tvd": 0.0244, "kept:llama.cpp": list(range(40)),
         "kept:vllm": list(range(41)), "p:llama.cpp": [0.025] * 40 + [0.0], "p:vllm": [1 / 41] * 41}
    cells = [
        {"a": "llama.cpp", "b": "vllm", "setting": "T0.8", "relation": "same", "max_tvd": 0.0, "examples": 150,
         "note": ""},
        {"a": "llama.cpp", "b": "vllm", "setting": "k<40>", "relation": "differs", "intended": True,
         "why": ["top_k keeps exactly k " + EVIL], "witness": w, "max_tvd": 0.273,
         "max_tvd_case": {"logits": [1.0, 1.0, 2.0], "history": [7]}},
        {"a": "llama.cpp", "b": "<eng>", "setting": "T0.8", "relation": "differs", "intended": False, "why": [],
         "witness": {"logits": [math.nan, 1.0], "history": [], "tvd": math.nan}, "max_tvd": math.nan},
        {"a": "llama.cpp", "b": "<eng>", "setting": "k<40>", "relation": "n/a", "why": "<eng> has no top_k"}]
    return {"engine_matrix": {"engines": ["llama.cpp", "vllm", "<eng>"], "cells": cells,
                              "settings": {"T0.8": "Settings(temperature=0.8, top_k=0)",
                                           "k<40>": "Settings(temperature=0.8, top_k=40)"}},
            "engine_matrix_max_tvd": {"llama.cpp vs vllm": {"T0.8": "same", "k<40>": 0.273},
                                      "vllm vs <eng>": {"T0.8": 0.5, "k<40>": "n/a"}},
            "engine_sampling_rules": {
                "vllm race:zipf/64/t0.8": {"N": 100000, "p_value": 1.0, "tvd": 0.0017, "passed": True,
                                           "same_token_as_inverse_cdf": 0.5258},
                "candle gumbel:zipf/64/t0.8": {"N": 100000, "p_value": 0.9, "tvd": 0.002, "passed": False,
                                               "law_tvd_to_softmax": math.nan,
                                               "gate_against_softmax": "FAIL: GATE-DETAIL " + EVIL},
                "candle witness": {"logits": [0.0, -10.0], "candle": [1.0, 0.0], "note": EVIL}}}


def ops_tables() -> dict:
    """Op errors in u (one NaN ratio, one over its bound, a name with markup) and the cosine witness."""
    return {
        "ops_error_u": {
            "rms_norm|impl_vs_oracle[rms_norm]|float32": {"elements": 4096, "max_u": 4.05, "p50_u": 0.001,
                                                          "p90_u": 0.5, "p99_u": 1.26, "worst_of_bound": 0.3},
            "softmax|impl_vs_oracle[softmax]|float16": {"elements": 512, "max_u": math.inf, "p50_u": 0.1,
                                                        "p90_u": 1.0, "p99_u": 2.0, "worst_of_bound": math.nan},
            "<op>|masked&split|float32": {"elements": 8, "max_u": 30.0, "p50_u": 2.0, "p90_u": 9.0,
                                           "p99_u": 25.0, "worst_of_bound": 1.5}},
        "cosine_lies": {"recipe": {"family": EVIL, "seeds": [0, 1]}, "cosine": 0.99922, "top5_overlap": 0,
                        "kl_nats": math.nan, "max_abs_logit_diff": 21.3, "top5_a": [89, 79], "top5_b": [15, 30]}}


def section(page: str, anchor: str) -> str:
    start = page.index(f'<section id="{anchor}"')
    return page[start:page.index("</section>", start)]


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
    for rec in ("top_k", "top_p", "softmax", "temp", "rms_norm"):
        assert re.search(rf'<td class="nw">{rec}<div class="muted">', page), rec  # a distribution row
    assert "greedy ×25" in page  # exact-only records are listed with their example counts
    for mutant in ("topk_off_by_one", "softmax_no_max_shift", "q4_0_wrong_scale", "rmsnorm_no_eps"):
        assert mutant in page
    assert "1 SURVIVED" in page and "Bug zoo: op mutants (1 of 1 killed)" in page
    assert "WITNESS-TK-TP" in page and 'title="top_k then top_p vs top_p then top_k: differs (tvd 0.31)' in page
    assert "FINDING-NSIGMA" in page and "false_failures" in page and "weird_scalar" in page
    assert "gpu_impl.mirostat" in page and "NOT COVERED (2)" in page
    assert "why: temp keeps the order &lt;b&gt;" in page
    # a dict of flat dicts becomes one table keyed by its keys
    assert "<th>key</th><th>elements</th><th>max_u</th>" in page and ">rmsnorm|impl_vs_oracle|float32</td>" in page


def test_engine_matrix_grid_witnesses_and_escaping(page):
    em = section(page, "engine-matrix")
    assert "Cross-engine conformance matrix (3 pairs × 2 settings; 1 same, 3 differs, 2 n/a)" in em
    # the engine tables are drawn once, by this section, not dumped again by the generic renderer
    assert 'id="table-engine_matrix"' not in page and 'id="table-engine_matrix_max_tvd"' not in page
    # each in its area's part of the page, areas in their fixed order
    assert page.index('id="area-samplers"') < page.index('id="order-matrix"') < page.index('id="area-engines"') \
        < page.index('id="engine-matrix"') < page.index('id="area-zoo"') < page.index('id="table-zoo_samplers"')
    nav = page[page.index("<nav>"):page.index("</nav>")]
    assert nav.index('href="#area-samplers"') < nav.index('href="#area-engines"') < nav.index('href="#area-zoo"')
    assert "<eng>" not in em and "&lt;eng&gt; has no top_k" in em and "k&lt;40&gt;" in em
    assert "top_k keeps exactly k &lt;script&gt;" in em and "temperature 0.8 · top_k 40" in em
    bg, fg = tvd_colour(0.273)  # the cell is coloured by its largest TVD and links to its witness row
    assert f'style="background:{bg};color:{fg}"' in em and '<a href="#em-w-1"' in em and 'id="em-w-1"' in em
    assert 'title="llama.cpp vs vllm @ k&lt;40&gt;: differs, largest TVD found 0.273' in em
    assert "logits [3.5×41]" in em and "llama.cpp: keeps [0–39]" in em and "only vllm: 40" in em
    assert "UNEXPLAINED" in em and "1 difference(s) have no known explanation" in em and "NaN" in em
    assert re.search(r"vllm ↔ &lt;eng&gt;</th><td[^>]*>.*?>0\.5<", em)  # from engine_matrix_max_tvd alone
    rules = section(page, "table-engine_sampling_rules")
    assert "GATE-DETAIL" in rules and "<script" not in rules and 'class="bad"' in rules and "0.526" in rules


def test_tvd_colour_scale_darkens_with_tvd():
    def lum(hex_: str) -> float:
        return sum(w * int(hex_[i:i + 2], 16) for w, i in ((0.2126, 1), (0.7152, 3), (0.0722, 5)))
    shades = [lum(tvd_colour(t)[0]) for t in (1e-6, 1e-3, 0.01, 0.05, 0.2, 1.0)]
    assert shades[0] == shades[1] and all(a > b for a, b in zip(shades[1:], shades[2:]))
    assert tvd_colour(math.nan)[0] != tvd_colour(1.0)[0]


def test_ops_precision_and_cosine_witness(page):
    ops = section(page, "table-ops_error_u")
    order = [ops.index(x) for x in (">softmax<", "&lt;op&gt;", ">rms_norm<")]
    assert order == sorted(order), "rows are sorted by error / bound, NaN (never within a model) first"
    assert "2 OVER THE MODEL BOUND" in ops and "masked&amp;split" in ops and "≤ 0.001" in ops
    assert re.search(r">4\.05</td><td[^>]*>13\.5</td>", ops)  # the bound at the tightest element, from worst_error
    assert "150 %" in ops and "∞" in ops
    lies = section(page, "table-cosine_lies")
    assert "0.9992" in lies and "0 of 5" in lies and "NaN nats" in lies and "&lt;script&gt;" in lies


def test_zoo_rows_recovered_from_tests():
    """A zoo that records only kills: a failed kill test is a survivor, an unrecorded verdict is unknown."""
    tests = [{"nodeid": "properties/zoo/test_zoo.py::test_mutant_is_killed[ops-ghost]", "outcome": "failed",
              "reason": "DID NOT RAISE " + EVIL},
             {"nodeid": "properties/zoo/test_zoo.py::test_mutant_is_killed[ops-caught]", "outcome": "passed"},
             {"nodeid": "properties/zoo/test_zoo.py::test_mutant_is_killed[quants-elsewhere]", "outcome": "failed"}]
    page = render({"tests": tests, "tables": {"zoo_ops": {"caught": {"bug": "b", "examples_to_kill": 2},
                                                          "quiet": {"bug": "no verdict recorded"}}}})
    zoo = section(page, "table-zoo_ops")
    assert "1 of 3 killed, 1 SURVIVED, 1 without a recorded verdict" in zoo
    assert "ghost" in zoo and "test failed: DID NOT RAISE &lt;script&gt;" in zoo and "elsewhere" not in zoo


def test_failure_is_prominent_and_truncated(page):
    assert "1 test FAILED" in page
    assert "test_impl_matches_oracle[top_p-float16]" in page
    assert "more characters]" in page and "TAIL-OF-TRACE" not in page
    assert "∞" in page and "NaN" in page


def test_distributions_are_inline_svg(page):
    """One histogram per measured (record, property, dtype), drawn in SVG with the bound marked."""
    svgs = re.findall(r'<svg class="hist".*?</svg>', page, re.S)
    assert len(svgs) == 5 and all('stroke-dasharray' in s for s in svgs)
    nan_row = next(s for s in svgs if "1 examples" in s and "past the bound 1" in s)
    assert 'fill="#c0392b"' in nan_row  # NaN / ∞ are drawn past the bound, in red


def test_odd_shapes_do_not_crash():
    for tables in ({"order_matrix": [1, 2]}, {"zoo_samplers": {"a": 1}}, {"order_matrix": {"cells": {"a|b": "differs"}}},
                   {"stats_gate": None}, {}, {"engine_matrix": [1, 2]}, {"engine_matrix": {"cells": [{"a": None}, 3]}},
                   {"engine_matrix_max_tvd": {"x": 3, "a vs b": {"s": "odd"}}}, {"ops_error_u": [1]},
                   {"ops_error_u": {"a": {"max_u": "x", "worst_of_bound": None}}}, {"cosine_lies": {"cosine": "abc"}},
                   {"engine_sampling_rules": {"x": {"N": 1, "gate_against_softmax": 3}, "y": 2}}):
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


def test_first_screen_counts_what_judged_the_implementation():
    from reports.render import render
    from reports.summary import judged_lines

    rows = [{"nodeid": "properties/samplers/test_impl_vs_oracle.py::a", "outcome": "passed", "duration": 0, "reason": "",
             "judged": True},
            {"nodeid": "properties/ops/test_ops.py::b", "outcome": "skipped", "duration": 0,
             "reason": "NOT COVERED: silu is not implemented in x", "judged": True},
            {"nodeid": "properties/ops/test_ops.py::c", "outcome": "failed", "duration": 0, "reason": "boom",
             "judged": True, "failure": {}, "reproduce": "r"},
            {"nodeid": "properties/meta/test_meta_stats.py::d", "outcome": "passed", "duration": 0, "reason": ""}]
    results = {"schema_version": 2, "meta": {"impl": "exec:./h"}, "tests": rows}
    lines = judged_lines(results)
    assert lines[0] == "3 tests judged exec:./h: 1 passed, 1 failed, 1 NOT COVERED"
    assert any(line.endswith("1 tests judged exec:./h: 1 passed, 0 failed, 0 NOT COVERED") for line in lines[1:])
    assert "3 tests judged exec:./h: 1 passed, 1 failed, 1 NOT COVERED" in render(results)
    assert judged_lines({"tests": [r for r in rows if "judged" not in r]}) == []
