"""The end of a run, short: a verdict per judged function, the failures grouped by cause, and
NOT COVERED collapsed to what the implementation lacks where it answers at all.

Pure functions of the finished tests' rows (``Row``), which the pytest plugin fills from the
reports it receives (on pytest-xdist's controller too), so they are tested without a run.

A *cause* is function × property × first divergence: the functions the test calls, the property
that said no as ``Failure`` names it (row left out: the same bug shows on another row of another
case), and its category; a failure that is no ``Failure`` (a harness fault, a bare assert) is
grouped by the functions its message names and that message with its numbers blanked (the same
chain step failing in two tests is one group). One bug that fails a property at three dtypes is
one group, shown once with the smallest shrunk case.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Iterable

from properties.calls import last_mention
from properties.failure import property_of

NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?")


@dataclass
class Row:
    """One finished test, as the summary needs it."""
    nodeid: str
    outcome: str
    """passed, failed or skipped (errors in setup count as failed)."""
    area: str
    calls: tuple[str, ...] = ()
    not_covered: bool = False
    """Skipped as NOT COVERED (the implementation lacks a function, or the case)."""
    failure: dict[str, Any] = field(default_factory=dict)
    """The ``Failure`` fields (``Failure.fields``) with its rerun command; {} for other failures."""
    crash: str = ""
    """The exception's one-line message (pytest's crash line), for a failure with no fields."""
    blamed: tuple[str, ...] = ()
    """Of ``calls``, the functions a failure is counted against (``properties.calls.blamed``)."""
    judged: bool = True
    """The test takes the implementation (the per-function verdict counts only these)."""


def _test_name(nodeid: str) -> str:
    return nodeid.rsplit("::", 1)[-1].split("[", 1)[0]


def cause(row: Row) -> tuple[str, ...]:
    f = row.failure
    who = ", ".join(row.blamed or row.calls) or row.area
    if f.get("property"):
        return (who, property_of(f["property"]), f.get("category", ""))
    first = (row.crash or "").strip().splitlines()[0] if (row.crash or "").strip() else ""
    at = last_mention(row.blamed, first) if len(row.blamed) == 1 else None
    divergence = first[at[1]:] if at else first  # from the stage that diverged: "top_p{..}: kept ..."
    return (who, NUMBER.sub("#", divergence)[:160] or _test_name(row.nodeid), "")


@dataclass
class Group:
    key: tuple[str, ...]
    rows: list[Row]

    @property
    def shown(self) -> Row:
        """The member with the smallest shrunk case (ties: the first by node id)."""
        return min(self.rows, key=lambda r: (len(r.failure.get("case", "") or ""), r.nodeid))

    def lines(self, index: int) -> list[str]:
        r = self.shown
        f = r.failure
        dtypes = sorted({str(x.failure.get("dtype")) for x in self.rows if x.failure.get("dtype")})
        what = f"{self.key[1]}" + (f" ({self.key[2]})" if f.get("property") and self.key[2] else "")
        at = f", at {', '.join(dtypes)}" if len(dtypes) > 1 else ""
        if not f.get("property"):
            what = _test_name(r.nodeid)  # the message is the WHY line below
        out = [f"[{index}] {self.key[0]} × {what}: {len(self.rows)} failed test{'s' * (len(self.rows) > 1)}{at}"]
        crash = r.crash.strip().splitlines()[0] if r.crash.strip() else ""
        why = f.get("why") or crash
        if why:
            out.append(f"  WHY   {why}")
        if f.get("error_u") is not None:
            out.append(f"  error {f['error_u']:.4g} u, bound {f['bound_u']:.4g} u")
        if f.get("case"):
            out.append(f"  case  {one_line(f['case'])}")
        out.append(f"  test  {r.nodeid}")
        out.append(f"  rerun {f.get('rerun') or r.nodeid}")
        others = sorted(x.nodeid for x in self.rows if x is not r)
        if others:
            shown = ", ".join(_short(n) for n in others[:4])
            out.append(f"  also  {shown}" + (f" and {len(others) - 4} more" if len(others) > 4 else ""))
        return out


def one_line(case: str) -> str:
    """A case on one line; hypothesis' "Falsifying example: test(impl=<...>, ...)" note without
    the implementation's repr, which says nothing about the case."""
    parts = [p.strip() for p in str(case).splitlines()]
    return " ".join(p for p in parts if p and not p.startswith("impl=<"))


def _short(nodeid: str) -> str:
    return nodeid.rsplit("/", 1)[-1]


def groups(rows: Iterable[Row]) -> list[Group]:
    """The failed rows grouped by ``cause``, biggest group first."""
    by: dict[tuple[str, ...], list[Row]] = {}
    for r in rows:
        if r.outcome == "failed":
            by.setdefault(cause(r), []).append(r)
    return sorted((Group(k, v) for k, v in by.items()), key=lambda g: (-len(g.rows), g.key))


def failure_lines(rows: list[Row]) -> list[str]:
    gs = groups(rows)
    out: list[str] = []
    for i, g in enumerate(gs, 1):
        out += g.lines(i)
    return out


@dataclass
class Tally:
    passed: int = 0
    failed: int = 0
    not_covered: int = 0
    skipped: int = 0

    def add(self, row: Row) -> None:
        if row.outcome == "skipped":
            if row.not_covered:
                self.not_covered += 1
            else:
                self.skipped += 1
        elif row.outcome == "failed":
            self.failed += 1
        else:
            self.passed += 1

    @property
    def answered(self) -> bool:
        return bool(self.passed or self.failed)

    def text(self) -> str:
        parts = [f"{self.passed} passed"] + ([f"{self.failed} FAILED"] if self.failed else []) + \
                ([f"{self.not_covered} NOT COVERED"] if self.not_covered else []) + \
                ([f"{self.skipped} skipped"] if self.skipped else [])
        verdict = "FAIL" if self.failed else "pass" if self.passed else "NOT COVERED" if self.not_covered else "skipped"
        return f"{verdict:<11} {', '.join(parts)}"


def per_function(rows: Iterable[Row]) -> dict[str, Tally]:
    """Each judged function's tests (a test calling two functions counts for both)."""
    out: dict[str, Tally] = {}
    for r in rows:
        for fn in r.calls:
            if r.outcome == "failed" and r.blamed and fn not in r.blamed:
                out.setdefault(fn, Tally())  # listed, not failed: the failure is another function's
                continue
            out.setdefault(fn, Tally()).add(r)
    return out


def per_area(rows: Iterable[Row]) -> dict[str, Tally]:
    out: dict[str, Tally] = {}
    for r in rows:
        out.setdefault(r.area, Tally()).add(r)
    return out


def function_lines(rows: list[Row], everything: bool = False, only: frozenset[str] | None = None) -> list[str]:
    """One line per function the implementation answered (any test passed or failed), then the
    functions it lacks in the areas it answers, in one line; ``everything``: every NOT COVERED
    function, area by area, the areas it does not answer at all included."""
    fns = per_function(rows)
    answered = {fn: t for fn, t in fns.items() if t.answered and (only is None or fn in only)}
    width = max((len(f) for f in answered), default=0)
    out = [f"  {fn:<{width}}  {t.text()}" for fn, t in sorted(answered.items(), key=lambda kv: (not kv[1].failed, kv[0]))]
    areas = per_area(rows)
    live = {a for a, t in areas.items() if t.answered}
    lacked: dict[str, set[str]] = {}
    for r in rows:
        for fn in r.calls:
            if not fns[fn].answered and fns[fn].not_covered and (only is None or fn in only):
                lacked.setdefault(r.area, set()).add(fn)
    near = sorted({fn for a in live for fn in lacked.get(a, ())})
    if near:
        out.append(f"  NOT COVERED in the areas it answers ({', '.join(sorted(live))}): {', '.join(near)}")
    silent = sorted(a for a, t in areas.items() if not t.answered and t.not_covered)
    if silent and not everything and only is None:
        n = sum(areas[a].not_covered for a in silent)
        out.append(f"  not answered at all: {', '.join(silent)} ({n} NOT COVERED tests; --all-not-covered lists them)")
    if everything:
        for a in sorted(lacked):
            out.append(f"  NOT COVERED, {a}: {', '.join(sorted(lacked[a]))}")
    unknown = sum(1 for r in rows if not r.calls)
    if unknown:
        out.append(f"  ({unknown} judged tests say no function they call: counted per area only)")
    return out
