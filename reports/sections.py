"""The report's sections: each belongs to an area and is fed by named results.json tables.

A new section is one function and one decorator, in a module listed in ``SECTION_MODULES``::

    @section("parity", "Whole-model parity", area="parity", tables=("parity",))
    def parity_section(ctx: Context) -> str:      # returns the section's body HTML
        return generic(ctx.tables["parity"])

``tables`` names the tables the section draws (shell patterns: ``parity*``); those tables
are not drawn again by the generic renderer. A section whose tables are all absent from the run is
shown as "not run" with the tables it waits for, never left out.
"""
from __future__ import annotations

import fnmatch
import importlib
from dataclasses import dataclass, field
from typing import Any, Callable

from reports.tables import esc, generic

# Modules whose @section functions make up the page; another area adds its module here.
SECTION_MODULES = ("reports.builtin_sections", "reports.distributions", "reports.parity_section", "reports.backend",
                   "reports.calibration", "reports.drift_section")


@dataclass
class Context:
    """What a section may read: the parsed results and their parts, already type-checked."""

    results: dict[str, Any]
    tables: dict[str, Any]
    tests: list[dict[str, Any]]
    worst_error: list[dict[str, Any]]

    @classmethod
    def of(cls, results: dict[str, Any]) -> "Context":
        tables = results.get("tables") if isinstance(results.get("tables"), dict) else {}
        return cls(results, tables, [t for t in results.get("tests") or [] if isinstance(t, dict)],
                   [w for w in results.get("worst_error") or [] if isinstance(w, dict)])


@dataclass(frozen=True)
class Section:
    anchor: str
    title: str
    area: str
    tables: tuple[str, ...]
    render: Callable[[Context], str]
    order: int = 50
    has_data: Callable[[Context], bool] | None = None   # default: any of its tables is present
    absent: str = ""                                      # why it is "not run" (default: the tables it waits for)

    def claims(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, t) for t in self.tables)

    def present(self, ctx: Context) -> bool:
        if self.has_data is not None:
            return self.has_data(ctx)
        return any(self.claims(n) for n in ctx.tables)


SECTIONS: list[Section] = []


def section(anchor: str, title: str, *, area: str, tables: tuple[str, ...] = (), order: int = 50,
            has_data: Callable[[Context], bool] | None = None, absent: str = "") -> Callable:
    """Register ``fn(ctx) -> html`` as a section (see the module docstring)."""
    def register(fn: Callable[[Context], str]) -> Callable[[Context], str]:
        SECTIONS[:] = [s for s in SECTIONS if s.anchor != anchor]  # a module re-imported replaces its own
        SECTIONS.append(Section(anchor, title, area, tables, fn, order, has_data, absent))
        return fn
    return register


def load() -> list[Section]:
    for name in SECTION_MODULES:
        importlib.import_module(name)
    return sorted(SECTIONS, key=lambda s: (s.order, s.anchor))


# Tables no section claims go to an area by their name (findings are peers' output, and so on).
_GENERIC_AREAS = (("zoo", "zoo"), ("findings", "peers"), ("peer", "peers"), ("llama_cpp", "peers"),
                  ("stats", "judge"), ("gof", "samplers"), ("split", "samplers"), ("handoff", "samplers"),
                  ("engine", "engines"), ("ops", "ops"), ("quant", "quants"), ("parity", "parity"))


def generic_area(name: str) -> str:
    return next((area for key, area in _GENERIC_AREAS if key in name), "other")


@dataclass
class Drawn:
    """One section as placed on the page."""

    anchor: str
    title: str
    area: str
    html: str
    ran: bool = True
    waits_for: tuple[str, ...] = field(default=())


def not_run(s: Section) -> str:
    names = " or ".join(f"<code>{esc(t)}</code>" for t in s.tables)
    why = esc(s.absent) if s.absent else f"No test in this run recorded {names}."
    return (f'<section id="{esc(s.anchor)}" class="notrun"><h3>{esc(s.title)}: not run</h3>'
            f'<p class="muted">{why}</p></section>')


def draw(results: dict[str, Any], titles: dict[str, tuple[str, str]]) -> list[Drawn]:
    """Every registered section (drawn, or "not run"), then one generic section per unclaimed table."""
    ctx = Context.of(results)
    out = []
    for s in load():
        if s.present(ctx):
            try:
                html = s.render(ctx)
            except Exception as exc:  # one malformed table must not cost the whole page
                html = (f'<section id="{esc(s.anchor)}"><h3>{esc(s.title)}</h3><p class="bad">This section could '
                        f"not be drawn: {esc(type(exc).__name__)}: {esc(exc)}</p></section>")
            out.append(Drawn(s.anchor, s.title, s.area, html))
        else:
            out.append(Drawn(s.anchor, s.title, s.area, not_run(s), False, s.tables))
    claimed = {n for n in ctx.tables for s in SECTIONS if s.claims(n)}
    for name in sorted(n for n in ctx.tables if n not in claimed):
        title, intro = titles.get(name, (name.replace("_", " ").capitalize(), ""))
        intro_html = f'<p class="muted">{esc(intro)}</p>' if intro else ""
        anchor = f"table-{name}"
        out.append(Drawn(anchor, title, generic_area(name),
                         f'<section id="{esc(anchor)}"><h3>{esc(title)}</h3>{intro_html}{generic(ctx.tables[name])}'
                         "</section>"))
    return out
