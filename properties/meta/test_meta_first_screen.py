"""Meta: the report's first screen says what is wrong and how to reproduce it; every area has a
verdict ("not run" included); sections register by area; older results files still render."""
from __future__ import annotations

import re

import pytest

from properties.meta import synthetic
from properties.failure import Failure
from properties.measure import ErrorReport
from properties.recording import failure_fields
from reports.areas import AREAS, area_of, verdicts
from reports.render import render
from reports.schema import problems
from reports.sections import SECTIONS, Context, draw, section


@pytest.fixture(scope="module")
def failing() -> dict:
    return synthetic.results(failures=("rec003",))


def first_screen(page: str) -> str:
    """Everything before the first area part: the header, the failures, the changes."""
    return page[:page.index('<section class="area')]


def test_synthetic_results_follow_the_schema(failing):
    assert problems(failing) == []
    assert problems({"tests": {}}) and problems([]) == ["results.json must hold an object, not list"]


@pytest.mark.parametrize("nodeid, area", [
    ("properties/test_impl_vs_oracle.py::test_impl_matches_oracle[top_k-float32]", "samplers"),
    ("properties/ops/test_rms_norm.py::test_x", "ops"), ("properties/test_ops_zoo.py::test_mutant_is_killed[a]", "zoo"),
    ("properties/test_quants_peer.py::test_peer", "peers"), ("properties/models/test_forward.py::t", "parity"),
    ("properties/peers/llama_cpp/test_llama_cpp.py::t[a/b.py::c]", "peers"),
    ("properties/meta/test_meta_stats.py::t", "judge"), ("properties/test_backend_cupy.py::t", "gpu"),
    ("elsewhere/test_x.py::t", "other")])
def test_area_of(nodeid, area):
    assert area_of(nodeid) == area


def test_every_area_has_a_verdict(failing):
    vs = {v.area.key: v for v in verdicts(failing)}
    assert [a.key for a in AREAS] == [k for k in vs if k != "other"]
    assert vs["samplers"].label == "FAIL" and vs["parity"].label == "NOT RUN" and vs["ops"].label == "PASS"
    page = render(failing)
    tiles = re.findall(r'<a class="tile (\w[\w-]*)" href="#area-(\w+)">', page)
    assert ("fail", "samplers") in tiles and ("not-run", "parity") in tiles and len(tiles) == len(AREAS)


def test_first_screen_shows_the_failure_and_how_to_reproduce_it(failing):
    top = first_screen(render(failing))
    assert "1 test FAILED" in top
    item = top[top.index('<section id="failures"'):]
    assert "impl≡oracle probabilities[rec003] row 0" in item                       # the property
    assert "Case(family=&#x27;flat&#x27;, vocab=32000" in item                     # the shrunk case
    assert "error 51.2 u</b> against a bound of 20 u" in item and "2.56× the bound" in item
    assert ("python -m pytest &#x27;properties/test_impl_vs_oracle.py::test_impl_matches_oracle[rec003-float16]"
            "&#x27; --hypothesis-profile=nightly --hypothesis-seed=3") in item
    env = top[top.index('<div class="env">'):]
    for fact in ("numpy", "CPU via NumPy", "nightly, seed 3", "hypothesis 6.155.2", "workers</b> 2"):
        assert fact in env, fact


def test_passing_run_first_screen():
    top = first_screen(render(synthetic.results()))
    assert "All selected tests passed" in top and 'id="failures"' not in top
    assert "1 function(s) NOT COVERED" in top


def test_failure_fields_are_read_off_the_exception():
    """A Failure's fields as the results row holds them; its message is derived from them."""
    rep = ErrorReport(3.5, 2.0, 9)
    f = Failure(rep.describe(), property="impl≡oracle logits", record="temp", case=_Drawn(), row=1, report=rep)
    assert str(f) == "WHY  impl≡oracle logits[temp] row 1: worst error 3.5 u at index 9 (model allows 2 u)\n" \
                     "CASE Case(family='zipf', vocab=64)"
    assert failure_fields(f) == {"property": "impl≡oracle logits[temp] row 1", "record": "temp", "dtype": "float16",
                                 "case": "Case(family='zipf', vocab=64)", "category": "error bound", "rerun": "",
                                 "why": "worst error 3.5 u at index 9 (model allows 2 u)",
                                 "error_u": 3.5, "bound_u": 2.0, "ratio": 1.75}
    exact = failure_fields(Failure("kept 3, must keep 2", property="top_k survivors", case="c"))
    assert "error_u" not in exact and exact["case"] == "c" and exact["category"] == "exact"
    group = ExceptionGroup("two bugs", [ValueError("x"), f])  # hypothesis' report of several failures
    assert failure_fields(group)["record"] == "temp"
    assert failure_fields(AssertionError("assert 1 == 2"), ("Falsifying example: test_x(n=3)",)) == \
        {"case": "Falsifying example: test_x(n=3)"}
    with pytest.raises(ValueError, match="category"):
        Failure("?", property="p", category="flaky")


class _Drawn:
    dtype = "float16"

    def __repr__(self) -> str:
        return "Case(family='zipf', vocab=64)"


def test_sections_register_and_show_not_run():
    @section("meta-probe", "Probe section", area="parity", tables=("probe_*",), order=99)
    def _probe(ctx: Context) -> str:
        return f'<section id="meta-probe">PROBE {len(ctx.tables["probe_a"])}</section>'
    try:
        absent = {d.anchor: d for d in draw({"tables": {}}, {})}
        assert not absent["meta-probe"].ran and "probe_*" in absent["meta-probe"].html
        page = render({"tables": {}})
        assert "Whole-model parity: not run" in page and "Probe section: not run" in page
        present = {d.anchor: d for d in draw({"tables": {"probe_a": [1, 2]}}, {})}
        assert present["meta-probe"].html == '<section id="meta-probe">PROBE 2</section>'
        assert not any(d.anchor == "table-probe_a" for d in present.values())  # claimed: not drawn twice
    finally:
        SECTIONS[:] = [s for s in SECTIONS if s.anchor != "meta-probe"]


def test_a_broken_section_costs_only_itself():
    @section("meta-broken", "Broken", area="ops", tables=("broken",))
    def _broken(ctx: Context) -> str:
        raise KeyError("boom")
    try:
        page = render({"tables": {"broken": 1}})
        assert "could not be drawn: KeyError" in page and "</html>" in page
    finally:
        SECTIONS[:] = [s for s in SECTIONS if s.anchor != "meta-broken"]


def test_unclaimed_tables_land_in_an_area():
    page = render({"tables": {"mystery_findings": [{"a": 1}], "totally_new": {"x": 1}}})
    peers = page[page.index('id="area-peers"'):page.index('id="area-parity"')]
    assert 'id="table-mystery_findings"' in peers
    assert 'id="area-other"' in page and 'id="table-totally_new"' in page[page.index('id="area-other"'):]


def test_version_1_results_still_render():
    v1 = {"meta": {"impl": "gpu_impl", "backend": "numpy", "profile": "ci"},
          "tests": [{"nodeid": "properties/test_impl_vs_oracle.py::test_impl_matches_oracle[top_k-float32]",
                     "outcome": "failed", "duration": 1.0, "reason": "x.py:1: AssertionError: boom\n\ntrace"}],
          "worst_error": [{"record": "top_k", "property": "impl_vs_oracle", "dtype": "float32", "worst_u": 3.0,
                           "bound_u": 40.0, "ratio": 0.075}],
          "examples": [{"record": "top_k", "property": "impl_vs_oracle", "count": 40}], "tables": {}}
    page = render(v1)
    assert "AssertionError: boom" in page and "python -m pytest" in page and 'id="dist-samplers"' in page
    assert '<svg class="hist"' in page[page.index('id="dist-samplers"'):]
