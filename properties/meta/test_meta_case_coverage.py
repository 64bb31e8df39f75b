"""NOT COVERED per case (``properties/case_coverage.py``): an implementation that answers
unsupported for some cases of a function is judged on its other cases and the test says on how
many; one that answers unsupported for every case is NOT COVERED. Run in a subprocess on
``properties/meta/impls/partly_unsupported.py``."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

from properties.packages import checkout_env

ROOT = Path(__file__).resolve().parents[2]


def test_an_unsupported_case_leaves_the_other_cases_judged(tmp_path):
    results = tmp_path / "results.json"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "properties/engines/test_variants.py", "-q", "-p", "no:cacheprovider", "-n", "0",
         "-k", "test_engine_impl_matches_oracle and (transformers.top_p or transformers.min_p) and float32",
         "--impl", "properties.meta.impls.partly_unsupported", "--hypothesis-profile=ci", "-W", "ignore", "-rs",
         "--lc-results", str(results)],
        cwd=ROOT, env=checkout_env(), capture_output=True, text=True, timeout=900)
    out = proc.stdout
    judged = re.search(r"test_engine_impl_matches_oracle\[transformers\.top_p-float32\]: judged on (\d+) of (\d+) cases "
                       r"\((\d+) answered unsupported\)", out)
    assert judged, out[-3000:]
    n, m, u = map(int, judged.groups())
    assert 0 < n < m and n + u == m, judged.group(0)
    assert re.search(r"SKIPPED .*NOT COVERED: the implementation answered unsupported for (\d+) of \1 cases", out), out[-3000:]
    assert "1 passed, 1 skipped" in out, out[-1500:]
    # the same count in results.json and on the report's page, not only in the terminal
    import json

    from reports.render import render

    rows = {t["nodeid"].split("::")[-1]: t for t in json.loads(results.read_text())["tests"]}
    assert rows["test_engine_impl_matches_oracle[transformers.top_p-float32]"]["cases"] == {"judged": n, "of": m}
    assert "cases" not in rows["test_engine_impl_matches_oracle[transformers.min_p-float32]"]
    assert judged.group(0) in render(json.loads(results.read_text()))


def test_a_listed_function_no_test_called_is_named():
    """A whole ``--judged-only`` run names every function the implementation has that no test
    called (``case_coverage.listed_unjudged``); here all but one are marked called."""
    from properties.case_coverage import listed_unjudged
    from properties.protocol.signatures import table

    called = {r.qualified for r in table()} - {"engines.candle_repeat_penalty"}
    assert listed_unjudged("gpu_impl", "numpy", called) == ["engines.candle_repeat_penalty: listed, called by no test"]
    assert listed_unjudged("properties.meta.impls.empty", "numpy", set()) == []
