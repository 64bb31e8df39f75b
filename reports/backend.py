"""The llama.cpp section's side-by-side: each sampler as llama.cpp's CPU code ran it
(``llama_cpp_peer``) next to the same sampler as llama.cpp's backend graph ran it
(``llama_cpp_backend``), and the chains of both. Only reads what the run recorded."""
from __future__ import annotations

from typing import Any

from reports.sections import Context, section
from reports.tables import esc, records_table

_INTRO = ("The same samplers run two ways by the same llama.cpp build: its CPU samplers on candidate "
          "arrays, and its backend samplers as ggml graph ops inside llama_decode (rows injected through a "
          "logit-injection model). identical: the oracle's exact answer (up to ties); inside error model: "
          "legal within the stated float32 allowance but not identical; classes: disagreements explained by "
          "a legal tie or a documented finding (a test fails on any other). A dash: that side has no such "
          "sampler (the backend has graph versions of 9 samplers only).")


def _dict(value: Any) -> dict:
    return value if isinstance(value, dict) else {}


def _classes(row: dict) -> str:
    classes = row.get("classes") or {}
    return "; ".join(f"{k}: {v}" for k, v in classes.items()) if isinstance(classes, dict) else str(classes)


def backend_rows(tables: dict[str, Any]) -> list[dict]:
    cpu, backend, generated = (_dict(tables.get(k)) for k in ("llama_cpp_peer", "llama_cpp_backend",
                                                               "llama_cpp_generated_chains"))
    names = [n for n in backend if n not in ("chain", "bad rows")] + [n for n in cpu if n not in backend
                                                                     and " " not in n]
    rows = []
    for name in names:
        c, b = _dict(cpu.get(name)), _dict(backend.get(name))
        rows.append({
            "sampler": name,
            "CPU examples": c.get("examples", "—"), "CPU identical": c.get("identical", "—"),
            "backend rows": b.get("rows", "—"), "backend identical": b.get("identical", "—"),
            "backend inside error model": b.get("inside_error_model", "—"),
            "backend classes": _classes(b) if b else "—"})
    chains = {k: _dict(v) for k, v in cpu.items() if k.startswith("chain ")}
    b = _dict(backend.get("chain"))
    rows.append({"sampler": "chains",
                 "CPU examples": sum(v.get("examples", 0) for v in chains.values()) + generated.get("examples", 0),
                 "CPU identical": sum(v.get("identical", 0) for v in chains.values()) + generated.get("identical", 0),
                 "backend rows": b.get("rows", "—"), "backend identical": b.get("identical", "—"),
                 "backend inside error model": b.get("inside_error_model", "—"),
                 "backend classes": _classes(b) if b else "—"})
    return rows


def backend_section(tables: dict[str, Any]) -> str:
    body = records_table(backend_rows(tables), columns=["sampler", "CPU examples", "CPU identical", "backend rows",
                                                        "backend identical", "backend inside error model",
                                                        "backend classes"])
    return (f'<section id="llama-cpp-backend"><h3>llama.cpp: backend samplers next to CPU samplers</h3>'
            f'<p class="muted">{esc(_INTRO)}</p>{body}</section>')


@section("llama-cpp-backend", "llama.cpp: backend samplers next to CPU samplers", area="peers", order=30,
         tables=("llama_cpp_backend*",))
def _backend(ctx: Context) -> str:
    return backend_section(ctx.tables)
