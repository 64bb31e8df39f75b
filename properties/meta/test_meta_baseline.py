"""Meta: ``logitcheck report --baseline`` lists what changed since an earlier run (new failures,
errors that grew or shrank past the stated factor, zoo kills), at the top of the page; the CLI's
exit codes."""
from __future__ import annotations

import copy
import json

import pytest

from properties.meta import synthetic
from reports.baseline import FLOOR, compare
from reports.cli import main
from reports.render import render


@pytest.fixture(scope="module")
def pair() -> tuple[dict, dict]:
    old = synthetic.results()
    new = synthetic.results(failures=("rec003",))
    rows = {(w["record"], w["dtype"]): w for w in new["worst_error"]}
    rows[("rec001", "float32")]["ratio"] = rows[("rec001", "float32")]["ratio"] * 2.5   # past ×2: regression
    rows[("rec002", "float32")]["ratio"] = rows[("rec002", "float32")]["ratio"] * 1.9   # within ×2: not listed
    rows[("rec004", "float32")]["ratio"] = rows[("rec004", "float32")]["ratio"] / 3     # improvement
    rows[("rec005", "float16")]["ratio_p90"] = rows[("rec005", "float16")]["ratio_p90"] * 4  # the p90 grew
    new["tables"]["zoo"][0]["killed"] = False                                             # a mutant survives
    return old, new


def test_compare_finds_each_kind_of_change(pair):
    old, new = pair
    ch = compare(old, new, factor=2.0)
    assert ch.new_failures == ["properties/test_impl_vs_oracle.py::test_impl_matches_oracle[rec003-float16]"]
    # the failing test's record grew from ~0.05 to ~2 of its bound: a regression as well as a failure
    assert {(r["record"], r["dtype"]) for r in ch.regressions} == {("rec001", "float32"), ("rec005", "float16"),
                                                                 ("rec003", "float16")}
    assert [r["which"] for r in ch.regressions if r["record"] == "rec005"] == [["p90"]]
    assert {(r["record"], r["dtype"]) for r in ch.improvements} == {("rec004", "float32")}
    assert [(k["mutant"], k["was"], k["now"], k["worse"]) for k in ch.kills] == [("mutant_0", True, False, True)]
    assert ch.worse == 5 and not ch.fixed
    assert ch.new_tests == ch.new_failures  # the baseline never ran it
    back = compare(new, old, factor=2.0)
    assert back.gone_tests == ch.new_failures and not back.new_failures and not back.fixed
    passing = copy.deepcopy(new)
    next(t for t in passing["tests"] if t["outcome"] == "failed")["outcome"] = "passed"
    assert compare(new, passing).fixed == ch.new_failures


def test_factor_and_floor_are_honoured(pair):
    old, new = pair
    assert {r["record"] for r in compare(old, new, factor=1.5).regressions} >= {"rec001", "rec002"}
    assert [r["record"] for r in compare(old, new, factor=10.0).regressions] == ["rec003"]
    tiny_old, tiny_new = copy.deepcopy(old), copy.deepcopy(old)
    w_old, w_new = tiny_old["worst_error"][0], tiny_new["worst_error"][0]
    w_old["ratio"], w_new["ratio"] = FLOOR / 100, FLOOR / 10        # ×10, but far under the floor
    w_old["ratio_p90"] = w_new["ratio_p90"] = 0.01
    assert not compare(tiny_old, tiny_new).regressions
    w_new["ratio"] = float("nan")                                     # NaN is worse than any number
    assert [r["record"] for r in compare(tiny_old, tiny_new).regressions] == [w_new["record"]]


def test_changes_are_at_the_top_of_the_page(pair):
    old, new = pair
    page = render(new, compare(old, new))
    changes = page.index('id="changes"')
    assert changes < page.index('<section class="area')
    assert "Since the baseline</a> (2026-01-02T02:17:00+00:00, profile nightly): 1 new failure(s), " \
           "3 error regression(s), 0 fixed, 1 improvement(s), 1 zoo change(s)." in page
    assert page.index("<header") < page.index('class="changes bad"') < page.index("</header>")
    section = page[changes:page.index("</section>", changes)]
    assert "killed → SURVIVED" in section and "×2" in section and "rec001" in section


def test_cli_baseline_strict_and_bad_input(tmp_path, pair, capsys):
    old, new = pair
    (tmp_path / "old.json").write_text(json.dumps(old))
    (tmp_path / "new.json").write_text(json.dumps(new))
    out = tmp_path / "out"
    args = ["report", "--from-results", str(tmp_path / "new.json"), "--out", str(out)]
    assert main(args + ["--baseline", str(tmp_path / "old.json")]) == 0
    assert 'id="changes"' in (out / "index.html").read_text(encoding="utf-8")
    assert "since the baseline: 1 new failure(s), 3 error regression(s)" in capsys.readouterr().out
    assert main(args + ["--strict"]) == 1
    assert main(["report", "--from-results", str(tmp_path / "old.json"), "--out", str(out), "--strict"]) == 0
    assert main(args + ["--baseline", str(tmp_path / "missing.json")]) == 2
    (tmp_path / "list.json").write_text("[1, 2]")
    assert main(["report", "--from-results", str(tmp_path / "list.json"), "--out", str(out)]) == 2
    assert "not a logitcheck results file" in capsys.readouterr().err
