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


def test_a_step_stopped_at_its_time_limit_still_names_what_failed(tmp_path: Path) -> None:
    """The suite step once ran past its limit on an H100 with nine failures and reported
    "0 tests, None failed": its JUnit XML is written only at the end. The verbose log is read
    instead, one verdict per test (the summary's own FAILED lines come only at the end)."""
    from reports.device_check import _log_counts

    log = tmp_path / "suite.log"
    log.write_text("\n".join([
        "properties/samplers/test_a.py::test_x[top_k] ",
        "[gw0] [  1%] PASSED properties/samplers/test_a.py::test_x[top_k] ",
        "[gw1] [  2%] FAILED properties/zoo/test_z.py::test_m[q5] ",
        "[gw2] [  3%] SKIPPED properties/peers/test_p.py::test_y ",
        "properties/ops/test_o.py::test_w PASSED                [  4%]",
        "[gw3] [  5%] ERROR properties/ops/test_o.py::test_e ",
    ]))
    got = _log_counts(log)
    assert got == {"tests": 5, "failed": 2, "skipped": 1, "incomplete": True,
                   "failures": ["properties/ops/test_o.py::test_e", "properties/zoo/test_z.py::test_m[q5]"]}
    assert _log_counts(tmp_path / "absent.log") == {"tests": 0, "failed": None}


def test_failures_are_streamed_as_they_happen_and_read_back(tmp_path: Path) -> None:
    """``--lc-results PATH`` also appends each failure to ``PATH.failures.jsonl`` when it happens
    (once, by the xdist controller), so a step stopped at its limit still gives each failure's WHY."""
    import subprocess
    import sys

    from properties.packages import checkout_env
    from reports.device_check import _nodeid, _streamed_whys

    (tmp_path / "test_two.py").write_text("def test_ok():\n    pass\n\n\ndef test_bad():\n    assert 1 == 2, 'one is not two'\n")
    results = tmp_path / "r.json"
    proc = subprocess.run([sys.executable, "-m", "pytest", str(tmp_path / "test_two.py"), "-p", "properties.plugin",
                           "-p", "no:cacheprovider", "-q", "-n", "2", "--lc-results", str(results)],
                          cwd=tmp_path, env=checkout_env(), capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stdout[-2000:] + proc.stderr[-2000:]
    lines = Path(str(results) + ".failures.jsonl").read_text().splitlines()
    assert len(lines) == 1 and json.loads(lines[0])["nodeid"].endswith("test_two.py::test_bad")
    whys = _streamed_whys(["x", "--lc-results", str(results)])
    assert list(whys) == [json.loads(lines[0])["nodeid"]] and "one is not two" in next(iter(whys.values()))
    assert _nodeid("properties.zoo.test_zoo::test_m[q5]") == "properties/zoo/test_zoo.py::test_m[q5]"


def test_the_rooms_device_check_leaves_out_never_run_on_the_backend() -> None:
    """device-check's suite step skips HOST_ONLY_ROOMS on the device. That is sound only while no
    test or fixture there takes the backend-bound fixtures (impl, oimpl, qimpl, backend), reads
    ``--backend`` or touches CuPy: checked on their sources (tests and fixtures; a helper may
    well take an ``impl`` it builds on NumPy itself)."""
    import ast

    from reports.device_check import HOST_ONLY_ROOMS, ROOT

    bound = {"impl", "oimpl", "qimpl", "backend"}
    offenders = []
    for room in HOST_ONLY_ROOMS:
        for path in sorted((ROOT / "properties" / room).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and (
                        node.name.startswith("test") or any("fixture" in ast.unparse(d) for d in node.decorator_list)):
                    taken = {a.arg for a in node.args.args + node.args.kwonlyargs} & bound
                    if taken:
                        offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} takes {sorted(taken)}")
                elif isinstance(node, ast.Call) and getattr(node.func, "attr", "") == "getoption" and node.args \
                        and getattr(node.args[0], "value", None) == "--backend":
                    offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} reads --backend")
                elif isinstance(node, (ast.Import, ast.ImportFrom)):
                    names = [a.name for a in node.names] + [getattr(node, "module", None) or ""]
                    if any(n.split(".")[0] == "cupy" for n in names):
                        offenders.append(f"{path.relative_to(ROOT)}:{node.lineno} imports cupy")
    assert offenders == []
