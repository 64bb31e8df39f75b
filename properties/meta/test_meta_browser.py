"""Meta: the report, opened in a real browser (headless Chromium), renders: not blank, no console
errors, every table and plot laid out, no sideways scrolling, and the first screen shows the area
verdicts and the failure. Run at the nightly profile's size (about 1,300 tests, 180 measured
record/property/dtype rows of 400 examples each, one injected failure); the page's size and load
time are printed, and bounded where a person would notice.

Skips, saying why, only if no Chromium is installed (.ci/run installs Debian's ``chromium``)."""
from __future__ import annotations

import pytest

from properties.meta import synthetic
from reports.browser import check_page, find_chromium, ink_fraction
from reports.render import render

WIDTH, HEIGHT = 1280, 900
MAX_PAGE_BYTES = 3_000_000  # a self-contained page a browser opens at once (the v1 page at ci size: 686 KB)
MAX_ELEMENTS = 60_000       # layout of a page this size stays interactive in Chromium on 2 cores


@pytest.fixture(scope="module")
def checked(tmp_path_factory):
    if find_chromium() is None:
        pytest.skip("no Chromium on PATH (.ci/run installs it: apt-get install -y chromium)")
    results = synthetic.results(n_tests=1300, n_records=60, examples=400, failures=("rec007",))
    tmp = tmp_path_factory.mktemp("browser")
    page = tmp / "index.html"
    page.write_text(render(results), encoding="utf-8")
    check = check_page(page, tmp / "first-screen.png", WIDTH, HEIGHT)
    print(f"\nnightly-size report: {page.stat().st_size / 1024:.0f} KB, {check.probe['nodes']:,} elements, "
          f"{check.probe['tables']} tables, {check.probe['svgs']} plots, load {check.probe['load_ms']:.0f} ms, "
          f"Chromium round trip {check.wall_s:.1f} s")
    return page, check, results


def test_page_renders_without_console_errors(checked):
    _, check, _ = checked
    assert check.console_errors == []
    assert ink_fraction(check.screenshot) > 0.03, "the first screen is blank"


def test_tables_and_plots_are_laid_out(checked):
    page, check, results = checked
    p = check.probe
    assert p["tables"] == page.read_text(encoding="utf-8").count("<table") and p["tables_blank"] == 0
    assert p["svgs"] == len(results["worst_error"]) and p["svgs_blank"] == 0
    assert p["images_broken"] == 0
    assert p["page_width"] <= WIDTH, f"sideways scrolling: {p.get('too_wide')}"


def test_first_screen_shows_verdicts_and_the_failure(checked):
    _, check, _ = checked
    p = check.probe
    assert p["summary_top"] < HEIGHT and p["areas_top"] < HEIGHT and p["failures_top"] < HEIGHT
    seen = " | ".join(p["first_screen"])
    assert "Samplers FAIL" in seen and "Parity NOT RUN" in seen and "Ops PASS" in seen
    assert "impl≡oracle probabilities[rec007]" in seen


def test_page_stays_usable_at_nightly_size(checked):
    page, check, _ = checked
    assert page.stat().st_size < MAX_PAGE_BYTES
    assert check.probe["nodes"] < MAX_ELEMENTS
