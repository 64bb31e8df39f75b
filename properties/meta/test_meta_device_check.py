"""``logitcheck device-check``'s report shows every step that ran: the smoke step's tests
(``properties/gpu``, which the suite step leaves out) land in the GPU backend area with their
counts instead of NOT RUN. Checked without a device on the files the two pytest steps write."""
from __future__ import annotations

import json
from pathlib import Path

from reports.areas import verdicts
from reports.device_check import _report


def _test(nodeid: str, outcome: str = "passed") -> dict:
    return {"nodeid": nodeid, "outcome": outcome, "duration": 0.01}


def test_smoke_results_fill_the_gpu_area(tmp_path: Path) -> None:
    suite = {"meta": {"impl": "gpu_impl", "backend": "cupy"}, "worst_error": [], "examples": [], "tables": {},
             "tests": [_test("properties/samplers/test_masking.py::test_x[top_k]")]}
    smoke = {"meta": {"impl": "gpu_impl"}, "worst_error": [], "examples": [], "tables": {},
             "tests": [_test(f"properties/gpu/test_kernels.py::test_k[{i}]") for i in range(5)]
             + [_test("properties/gpu/test_backend_cupy.py::test_b", "failed")]}
    (tmp_path / "results.json").write_text(json.dumps(suite))
    (tmp_path / "smoke-results.json").write_text(json.dumps(smoke))
    steps = [{"step": "smoke", "exit": 1, "seconds": 1.0, "tests": 6, "failed": 1, "skipped": 0},
             {"step": "suite", "exit": 0, "seconds": 2.0, "tests": 1, "failed": 0, "skipped": 0}]
    assert _report(tmp_path, steps, {})
    written = json.loads((tmp_path / "results.json").read_text())
    gpu = next(v for v in verdicts(written) if v.area.key == "gpu")
    assert gpu.counts["passed"] == 5 and gpu.counts["failed"] == 1 and gpu.label == "FAIL"
    samplers = next(v for v in verdicts(written) if v.area.key == "samplers")
    assert samplers.counts["passed"] == 1
    assert written["tables"]["gpu_device_check"][0]["step"] == "smoke"
    assert (tmp_path / "index.html").stat().st_size > 0


def test_no_smoke_file_leaves_the_suite_as_it_was(tmp_path: Path) -> None:
    suite = {"meta": {"impl": "gpu_impl"}, "worst_error": [], "examples": [], "tables": {},
             "tests": [_test("properties/samplers/test_masking.py::test_x[top_k]")]}
    (tmp_path / "results.json").write_text(json.dumps(suite))
    assert _report(tmp_path, [], {})
    written = json.loads((tmp_path / "results.json").read_text())
    assert len(written["tests"]) == 1
    assert next(v for v in verdicts(written) if v.area.key == "gpu").label == "NOT RUN"
