"""The suite's areas (samplers, ops, quants, ...) and the verdict of each: the page's first screen.

A test belongs to the area of its sub-package (``properties/ops/...``, and at any depth below it:
``properties/peers/llama_cpp/...`` is "peers"); tests still in the flat layout are placed by file name. An area no test ran in is shown as "not run", never left out.
"""
from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from typing import Any

from reports.tables import as_float


@dataclass(frozen=True)
class Area:
    key: str
    title: str
    packages: tuple[str, ...]   # sub-packages of properties/ whose tests are this area's
    files: str                  # regex on the test file's name, for the flat layout


AREAS = (
    Area("samplers", "Samplers", ("samplers", "speculative"), r"^test_(speculative|impl_vs_oracle|invariants|masking|"
         r"order_matrix|split_chain|"
         r"distribution|determinism|bad_input|row_contract|boundary_conventions|llama_cases)\b"),
    Area("ops", "Ops", ("ops",), r"^test_(ops(?!_zoo)|attention|metrics)"),
    Area("quants", "Quant formats", ("quants",), r"^test_(quants(?!_zoo|_peer)|fixtures)"),
    Area("engines", "Engines", ("engines",), r"^test_engine"),
    Area("protocol", "Harness protocol", ("protocol",), r"^test_(protocol|reference_harnesses)\b"),
    Area("peers", "Peers", ("peers",), r"^test_(peer_|quants_peer)"),
    Area("parity", "Parity", ("models", "parity"), r"^test_(parity|forward|model|layers)"),
    Area("zoo", "Bug zoo", ("zoo",), r"^test_(\w+_)?zoo\b"),
    Area("gpu", "GPU backend", ("gpu",), r"^test_(backend_cupy|rawkernel|gpu_)"),
    Area("judge", "Judge self-tests", ("meta",), r"^test_meta_"),
)
OTHER = Area("other", "Other", (), r"$^")
BY_KEY = {a.key: a for a in (*AREAS, OTHER)}
_PARAMS = re.compile(r"\[(.*)\]$")
_FILE = re.compile(r"(?:^|/)properties/(?:(?P<pkg>\w+)/(?:\w+/)*)?(?P<file>test_\w+)\.py::")


def area_of(nodeid: str) -> str:
    m = _FILE.search(str(nodeid))
    if not m:
        return OTHER.key
    pkg, name = m.group("pkg"), m.group("file")
    for a in AREAS:
        if pkg and pkg in a.packages:
            return a.key
    for a in AREAS:
        if re.search(a.files, name):
            return a.key
    return OTHER.key


@dataclass
class Verdict:
    area: Area
    counts: Counter
    over_bound: int             # measurements past their model (ratio > 1 or NaN) in this area

    @property
    def state(self) -> str:
        """fail | pass | skipped (ran, verified nothing) | not-run"""
        if self.counts.get("failed") or self.counts.get("error") or self.over_bound:
            return "fail"
        if self.counts.get("passed"):
            return "pass"
        return "skipped" if self.counts.get("skipped") else "not-run"

    @property
    def label(self) -> str:
        return {"fail": "FAIL", "pass": "PASS", "skipped": "SKIPPED", "not-run": "NOT RUN"}[self.state]


def record_areas(results: dict[str, Any]) -> dict[str, str]:
    """record -> area, from the tests that measured it (worst_cases) or ran its examples."""
    out: dict[str, str] = {}
    for w in results.get("worst_error") or []:
        if isinstance(w, dict):
            for c in w.get("worst_cases") or []:
                if isinstance(c, dict) and c.get("test"):
                    out.setdefault(str(w.get("record")), area_of(c["test"]))
    for e in results.get("examples") or []:
        if isinstance(e, dict) and e.get("test"):
            out.setdefault(str(e.get("record")), area_of(e["test"]))
    # version 1 files name no tests: a test whose parameter id names the record (test_x[top_k-float32])
    unplaced = {str(r.get("record")) for key in ("worst_error", "examples") for r in results.get(key) or []
                if isinstance(r, dict)} - set(out)
    for t in results.get("tests") or [] if unplaced else ():
        m = _PARAMS.search(str(t.get("nodeid", ""))) if isinstance(t, dict) else None
        for rec in unplaced & set(m.group(1).split("-")) if m else ():
            out.setdefault(rec, area_of(str(t.get("nodeid"))))
    return out


def verdicts(results: dict[str, Any]) -> list[Verdict]:
    counts: dict[str, Counter] = {a.key: Counter() for a in (*AREAS, OTHER)}
    for t in results.get("tests") or []:
        if isinstance(t, dict):
            counts[area_of(str(t.get("nodeid", "")))][str(t.get("outcome"))] += 1
    rec_area = record_areas(results)
    over: Counter = Counter()
    for w in results.get("worst_error") or []:
        r = as_float(w.get("ratio")) if isinstance(w, dict) else 0.0
        if isinstance(w, dict) and not r <= 1.0:
            over[rec_area.get(str(w.get("record")), OTHER.key)] += 1
    out = [Verdict(a, counts[a.key], over[a.key]) for a in AREAS]
    if counts[OTHER.key] or over[OTHER.key]:
        out.append(Verdict(OTHER, counts[OTHER.key], over[OTHER.key]))
    return out
