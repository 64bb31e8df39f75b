"""A property's "no" as data: ``Failure`` carries the property, record, dtype, the drawn case, the
measured error and its bound in u, a category and the command that reruns the test, as fields.

The checks raise it; ``properties.recording`` reads the fields off the exception for results.json
and the pytest plugin lists them at the end of the terminal summary, so nothing reads a failure
back from its message. The message is derived from the fields, for people: ``WHY <property>:
<why>`` then ``CASE <repr of the case>`` (the strategies' reprs are replay recipes).

It subclasses AssertionError so pytest and hypothesis treat it as a failed property (hypothesis
shrinks on it like on any assertion).
"""
from __future__ import annotations

import math
import re
from typing import Any

CASE_CHARS = 400  # a case's repr is its replay recipe; longer ones are cut in records and summaries

CATEGORIES = {
    "error bound": "a measured error in u exceeds the bound the numerics model allows",
    "exact": "an exact property broke: a survivor set, an equality, a bit pattern, a legal token",
    "distribution": "draws do not follow their law (the stratified grid, the one-CDF test)",
    "contract": "the call's contract: a shape, a range, the refusal of bad input",
    "crash": "the implementation raised on input it must answer",
}
"""What kind of "no" a failure is; the report and the terminal summary group and label by it."""

NO_CASE = object()
"""Default for ``case``: no drawn case (a failure of a fixed input names it in ``why``)."""


class Failure(AssertionError):
    """A property said no. Every field is plain data except ``case``, the drawn example itself."""

    def __init__(self, why: str, *, property: str = "", record: str = "", dtype: str | None = None,
                 case: Any = NO_CASE, row: int | None = None, error_u: float | None = None,
                 bound_u: float | None = None, report: Any = None, category: str = "", rerun: str = "") -> None:
        """``report`` (a ``measure.ErrorReport``) gives ``error_u`` and ``bound_u``; ``dtype``
        defaults to the case's; ``category`` to "error bound" when an error in u was measured,
        else "exact". ``rerun`` is filled in by the pytest plugin, which knows the test's nodeid."""
        if report is not None:
            error_u, bound_u = float(report.worst_u), float(report.bound_u)
        category = category or ("error bound" if error_u is not None else "exact")
        if category not in CATEGORIES:
            raise ValueError(f"unknown failure category {category!r}: one of {sorted(CATEGORIES)}")
        self.why, self.property, self.record, self.row = why, property, record, row
        self.case = case
        self.dtype = dtype if dtype is not None else str(getattr(case, "dtype", ""))
        self.error_u = None if error_u is None else float(error_u)
        self.bound_u = None if bound_u is None else float(bound_u)
        self.category, self.rerun = category, rerun
        super().__init__(self.message())

    @property
    def head(self) -> str:
        """"property[record] row r", the record left out where the property's name already
        carries it (``impl≡oracle[rms_norm]``)."""
        shown = f"{self.property}[{self.record}]" if self.record and self.record not in self.property \
            else self.property
        return shown + (f" row {self.row}" if self.row is not None else "")

    @property
    def case_repr(self) -> str:
        return "" if self.case is NO_CASE else case_repr(self.case)

    @property
    def ratio(self) -> float | None:
        """error / bound (0 / 0 is 0, anything else over 0 is inf); None without a measurement."""
        if self.error_u is None or self.bound_u is None:
            return None
        if self.bound_u:
            return self.error_u / self.bound_u
        return 0.0 if self.error_u == 0 else math.inf

    def message(self) -> str:
        if not self.property:  # a message with no structure: say it as given
            return self.why
        case = f"\nCASE {self.case_repr}" if self.case is not NO_CASE else ""
        return f"WHY  {self.head}: {self.why}{case}"

    def __str__(self) -> str:
        return self.message()

    def fields(self) -> dict[str, Any]:
        """The results row's ``failure`` object (plain data; see ``reports/schema.py``)."""
        out: dict[str, Any] = {"property": self.head, "record": self.record, "dtype": self.dtype,
                               "case": self.case_repr, "why": self.why[:500], "category": self.category,
                               "rerun": self.rerun}
        if self.error_u is not None:
            out.update(error_u=self.error_u, bound_u=self.bound_u, ratio=self.ratio)
        return out

    def __reduce__(self):  # keyword-only fields: pickle (multiprocessing, copy) through them
        return _rebuild, (self.why, {"property": self.property, "record": self.record, "dtype": self.dtype,
                                     "case": self.case, "row": self.row, "error_u": self.error_u,
                                     "bound_u": self.bound_u, "category": self.category, "rerun": self.rerun})


def property_of(head: str) -> str:
    """A failure's ``head`` (``fields()["property"]``) without its row: which property said no,
    whatever row of whatever case showed it (the end of a run groups failures by it)."""
    return re.sub(r" row -?\d+$", "", head)


def case_repr(case: Any) -> str:
    """A drawn case as its repr (the strategies' reprs are replay recipes), cut to CASE_CHARS."""
    if case is None:
        return ""
    text = case if isinstance(case, str) else repr(case)
    return text if len(text) <= CASE_CHARS else text[:CASE_CHARS] + " …"


def _rebuild(why: str, fields: dict[str, Any]) -> Failure:
    return Failure(why, **fields)


def failure_in(exc: BaseException | None) -> Failure | None:
    """The ``Failure`` an exception is or holds (hypothesis raises an ExceptionGroup when it
    found several distinct failures: the first one is reported)."""
    if isinstance(exc, Failure):
        return exc
    for inner in getattr(exc, "exceptions", ()) or ():
        found = failure_in(inner)
        if found is not None:
            return found
    return None
