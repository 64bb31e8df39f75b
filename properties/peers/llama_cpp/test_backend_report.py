"""The report's llama.cpp side-by-side (reports/backend.py): the backend's results next to the CPU
samplers', escaped, and robust to missing or oddly shaped tables."""
from __future__ import annotations

from reports.backend import backend_rows, backend_section
from reports.render import render

TABLES = {
    "llama_cpp_peer": {"top_k": {"examples": 40, "identical": 39}, "typical": {"examples": 40, "identical": 40},
                       "chain default": {"examples": 10, "identical": 900}, "dist stream": {"examples": 3}},
    "llama_cpp_backend": {"top_k": {"rows": 19, "identical": 19, "inside_error_model": 0, "classes": {}},
                          "min_p": {"rows": 16, "identical": 12, "inside_error_model": 0,
                                    "classes": {"backend-min-p-strict-threshold <b>": 2}},
                          "chain": {"rows": 40, "identical": 26, "inside_error_model": 0, "classes": {"x": 14}}},
    "llama_cpp_generated_chains": {"examples": 10, "identical": 160},
}


def test_backend_and_cpu_side_by_side():
    rows = {r["sampler"]: r for r in backend_rows(TABLES)}
    assert rows["top_k"]["CPU examples"] == 40 and rows["top_k"]["backend identical"] == 19
    assert rows["typical"]["backend rows"] == "—", "a CPU-only sampler shows a dash on the backend side"
    assert rows["min_p"]["CPU examples"] == "—" and "strict-threshold" in rows["min_p"]["backend classes"]
    assert rows["chains"]["CPU examples"] == 20 and rows["chains"]["backend rows"] == 40
    assert "dist stream" not in rows


def test_section_is_escaped_and_on_the_page():
    html = backend_section(TABLES)
    assert "<b>" not in html and "&lt;b&gt;" in html
    page = render({"meta": {}, "tests": [], "tables": TABLES})
    # drawn once, inside the peers area of the page
    assert page.count('id="llama-cpp-backend"') == 1
    assert page.index('id="area-peers"') < page.index('id="llama-cpp-backend"')


def test_odd_shapes_do_not_crash():
    for tables in ({"llama_cpp_backend": {}}, {"llama_cpp_backend": [], "llama_cpp_peer": "x"},
                   {"llama_cpp_backend": {"chain": {"classes": "weird"}}, "llama_cpp_generated_chains": [1]},
                   {"llama_cpp_backend": {"top_k": 3}, "llama_cpp_peer": {"chain default": None}}):
        backend_section(tables)
