"""Which functions of the judged API a collected test calls, so that ``--function top_p`` runs
exactly the tests that judge top_p.

Read from data the suite already holds, never from a table of test names: a test generated from
a property table carries the ``Property`` (its ``uses``), a catalogue record (a sampler's or an
engine chain's ``impl_name``, an op's ``fn``, a quant format's ``impl_fn``) or a record's name as
a parameter; a test with none of these says what it calls with ``@pytest.mark.calls("dist")``.
Names are qualified as ``logitcheck signatures`` prints them (``top_p``, ``ops.rms_norm``,
``quants.matvec``, ``engines.vllm_sample``): the fixture a test takes says which module of the
implementation a bare name belongs to.
"""
from __future__ import annotations

import difflib
import functools
import re
from typing import Any, Iterable

PART_OF_FIXTURE = (("oimpl", "ops"), ("qimpl", "quants"), ("impl", ""))
"""The implementation fixtures and the module of the judged API each one hands a test."""

MARKER = "calls"
MARKER_HELP = ("calls(*functions): the judged functions a test calls where its parameters do not say "
               "(read by --function)")


@functools.lru_cache(maxsize=1)
def judged() -> frozenset[str]:
    """Every function of the judged API, qualified (``properties.protocol.signatures``)."""
    from properties.protocol.signatures import IN_PROCESS_ONLY, table

    return frozenset(row.qualified for row in table()) | IN_PROCESS_ONLY


@functools.lru_cache(maxsize=1)
def _record_functions() -> dict[str, str]:
    """A sampler record's name -> the function it exercises (only records with an implementation)."""
    from properties.samplers.records import sampler_records

    return {r.name: r.impl_name for r in sampler_records(impl_only=True)}


def qualify(name: str, part: str) -> str | None:
    """``name`` as the judged API spells it, seen from a test that takes ``part``'s module; the
    engine stages are reached through the top-level implementation's ``engines`` module."""
    for candidate in (f"{part}.{name}" if part else name, name, f"engines.{name}"):
        if candidate in judged():
            return candidate
    return None


class _Traced(Exception):
    """Stops a traced recipe at its first call."""


class _Tracer:
    """Stands in for the implementation when a recipe (``run(api)``) is traced: notes the
    function the recipe calls, then stops it."""

    def __init__(self) -> None:
        self.called: set[str] = set()

    def call(self, fn: str, **kw: Any) -> Any:
        self.called.add(fn)
        raise _Traced

    def append(self, *args: Any) -> Any:
        raise _Traced


def _traced(run: Any) -> set[str]:
    tracer = _Tracer()
    try:
        run(tracer)
    except _Traced:
        pass
    except Exception:  # a recipe that does more than call: it says nothing here
        return set()
    return tracer.called


def _bare_names(value: Any) -> set[str]:
    """The implementation functions one parameter value (or ``calls`` marker argument) names,
    unqualified."""
    if isinstance(value, (tuple, list, frozenset, set)):  # a chain of records or of their names
        return {n for v in value for n in _bare_names(v)}
    if isinstance(value, str):
        # a record's name, or a function's (kept only where ``qualify`` finds it in the API)
        return {_record_functions().get(value, value)}
    out: set[str] = set()
    uses = getattr(value, "functions", None)
    if callable(uses):
        try:
            out |= set(uses())
        except (TypeError, AttributeError):  # a Property never fixed at a point: no answer
            pass
    for field in ("impl_name", "fn", "impl_fn"):
        name = getattr(value, field, None)
        if isinstance(name, str) and name:
            out.add(name)
    run = getattr(value, "run", None)  # a recipe run against an API (the ops' bad inputs): traced
    if callable(run) and not out:
        out |= _traced(run)
    inner = getattr(value, "record", None)  # a wrapper of a record (an op's batch-invariance entry)
    if inner is not None and not isinstance(inner, str) and inner is not value:
        out |= _bare_names(inner)
    return out


def part_of(fixturenames: Iterable[str]) -> str | None:
    names = set(fixturenames)
    return next((part for fixture, part in PART_OF_FIXTURE if fixture in names), None)


def functions_of(item: Any) -> frozenset[str] | None:
    """The judged functions test ``item`` calls; None when neither its parameters nor a ``calls``
    marker say (a judged test that says nothing is left out of ``--function`` runs, and
    ``properties/meta/test_meta_judge_cli.py`` holds that none does)."""
    part = part_of(getattr(item, "fixturenames", ()))
    if part is None:
        return None
    found: set[str] = set()
    callspec = getattr(item, "callspec", None)
    values = [arg for mark in item.iter_markers(MARKER) for arg in mark.args]
    values += list(callspec.params.values()) if callspec is not None else []
    for value in values:
        found |= {q for q in (qualify(n, part) for n in _bare_names(value)) if q}
    return frozenset(found) if found else None


def blamed(called: Iterable[str], record: str, message: str = "") -> tuple[str, ...]:
    """Of the functions a failed test calls, those its ``Failure`` names by its record (a top_p
    failure in a test that also calls softmax is top_p's), else the one its message's first line
    names last (a chain's "chain [top_k{..}, top_p{..}]: step 2 top_p{..}: kept 1 token the
    oracle may not keep" is top_p's); all of them when neither names one."""
    called = tuple(called)
    if record:
        name = _record_functions().get(record, record)
        return tuple(fn for fn in called if fn.rsplit(".", 1)[-1] in (record, name)) or called
    at = last_mention(called, message)
    return (at[0],) if at else called


def last_mention(called: Iterable[str], message: str) -> tuple[str, int] | None:
    """The function of ``called`` named last in the first line of ``message``, and where."""
    line = message.strip().splitlines()[0] if message.strip() else ""
    best: tuple[str, int] | None = None
    for fn in called:
        for m in re.finditer(rf"(?<![\w.]){re.escape(fn.rsplit('.', 1)[-1])}(?!\w)", line):
            if best is None or m.start() > best[1]:
                best = (fn, m.start())
    return best


def resolve(requested: Iterable[str]) -> tuple[frozenset[str], list[str]]:
    """The qualified functions ``--function`` names, and a message per name that is none.

    A bare name is the top-level function of that name (``softmax`` is the sampler; the op is
    ``ops.softmax``), else the one function of any module with that name (``rms_norm``)."""
    chosen: set[str] = set()
    problems: list[str] = []
    for name in requested:
        if name in judged():
            chosen.add(name)
            continue
        tails = sorted(q for q in judged() if q.rsplit(".", 1)[-1] == name)
        if len(tails) == 1:
            chosen.add(tails[0])
            continue
        near = tails or difflib.get_close_matches(name, sorted(judged()), n=4, cutoff=0.6)
        hint = f" (did you mean {', '.join(near)}?)" if near else " (logitcheck signatures lists them)"
        problems.append(f"--function {name}: not a function of the judged API{hint}")
    return frozenset(chosen), problems
