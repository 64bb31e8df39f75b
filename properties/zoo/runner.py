"""One runner for every bug zoo: hunt a mutant (or any implementation module) with the property
bodies of its domain and count the examples each needs to fail.

API (for the zoo tests, and for anyone plugging in conforming implementations or mutants):

- ``hunt(target, domain, budget=None, backend="numpy", until_first_kill=None) -> Hunt``.
  The domain's properties are ``properties.property.Property`` objects at their points.
  ``target`` is a ``Mutant`` of the domain (then only the properties whose bodies call a
  function it replaces take part, and the hunt stops at the first kill) or an implementation
  module or module name (then every property of the domain runs its whole budget: a conforming
  implementation must come out with no kill). ``Hunt.results`` holds one ``Result`` per property
  run: ``property``, ``killed``, ``examples_to_kill``, ``witness`` (the example that killed,
  copied before the body saw it), ``why``, ``ran``.
- ``control(hunt, backend="numpy") -> list[Result]``: exactly the (property, witness) pairs that
  killed, replayed against the unmutated implementation (the domain's module). Any kill there is
  a false alarm of the suite, not a catch.

Counting is the same for every zoo: each property runs from a fixed seed with no database and no
shrinking, for at most ``budget`` examples (default: the active hypothesis profile's
``max_examples``; a property may cap itself lower where one example is expensive), and
``examples_to_kill`` is the 1-based index of the first failing example. Any exception of the body
except ``NotCovered`` is a kill: a ``Failure`` is the property saying no, any other
exception is a crash on valid input, which fails the suite too.
"""
from __future__ import annotations

import contextlib
import copy
import importlib
from dataclasses import dataclass, field
from types import ModuleType
from typing import Any, Callable, ContextManager

import numpy as np
from hypothesis import Phase, given, seed, settings

from properties.backends import Impl, NotCovered
from properties.failure import failure_in
from properties.property import Property

# derandomize alone seeds from the source text of the search function (an edit would reshuffle
# every count); an explicit seed keeps examples-to-kill fixed across edits of this file
ZOO_SEED = 20260


@dataclass(frozen=True)
class Mutant:
    """The domain's implementation with one known bug."""
    name: str
    description: str
    replaces: frozenset[str] | None
    """The implementation functions whose behaviour the bug changes (None: an internal helper
    any of them may reach, so every property of the domain hunts it)."""
    apply: Callable[[ModuleType], ContextManager[ModuleType]]
    """The unmutated module -> a context in which the mutated module is live."""
    scope: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments for the domain's draws (e.g. a vocabulary range the bug needs)."""

    def __repr__(self) -> str:
        return self.name


def replaced(build: Callable[[ModuleType], ModuleType]) -> Callable[[ModuleType], ContextManager[ModuleType]]:
    """``Mutant.apply`` for a mutant built as a separate module object (nothing global changes)."""
    return lambda base: contextlib.nullcontext(build(base))


def swapped(base: ModuleType, label: str, **functions: Callable) -> ModuleType:
    """A new module with ``base``'s public API (``__all__``) and ``functions`` in place of theirs."""
    mod = ModuleType(f"{base.__name__}[{label}]")
    mod.__dict__.update({k: getattr(base, k) for k in base.__all__})
    mod.__dict__.update(functions)
    mod.__all__ = list(base.__all__)
    return mod


def host(x: Any) -> np.ndarray:
    """A NumPy copy of a NumPy or CuPy array, or of a Python scalar: a mutant that works on the
    host calls this instead of ``np.asarray``, which CuPy refuses (no implicit conversion)."""
    return x.get() if hasattr(x, "get") and not isinstance(x, np.ndarray) else np.asarray(x)


def like(x: np.ndarray, ref: Any) -> Any:
    """``x`` on ``ref``'s backend: a CuPy array where ``ref`` is one, else ``x`` unchanged."""
    if isinstance(ref, np.ndarray) or not hasattr(ref, "get"):
        return x
    import cupy
    return cupy.asarray(x)


def hunt_and_replay(mutant: "Mutant", domain: "Domain", backend: str, table: str, rows: dict[str, dict]
                    ) -> "Result":
    """Hunt ``mutant`` to its first kill with the profile's budget, record its row in ``table``
    (``rows`` keeps a zoo's rows across its tests), and replay the kill on the unmutated module:
    the kill (a Result), asserting it exists and that the unmutated module passes it."""
    found = hunt(mutant, domain, default_budget(), backend)
    replays = control(found, domain, backend)
    rows[mutant.name] = kill_record(mutant, found)
    from properties import recording

    recording.table(table, list(rows.values()))
    kill = found.first_kill
    assert kill is not None, f"{mutant.name} survived every {domain.name} property"
    assert_property_kill(mutant.name, kill)
    assert not any(r.killed for r in replays), f"the kill of {mutant.name} also fails the unmutated module: " \
                                               f"{replays[0].why[:300]}"
    return kill


def assert_property_kill(name: str, kill: "Result") -> None:
    """A kill counts only when the property said no (a ``Failure``): a mutant that dies of a
    TypeError or an implicit CuPy -> NumPy conversion is not backend-portable, and a property body
    that crashes on it has judged nothing."""
    assert kill.failure, (f"{name} was killed by {kill.property} with an exception, not by the property's "
                          f"verdict: {kill.why[:300]}")


def kill_record(mutant: "Mutant", found: "Hunt") -> dict[str, Any]:
    """One row of a zoo's kill table: which property killed the mutant, after how many examples."""
    kill = found.first_kill
    return {"mutant": mutant.name, "size": mutant.description, "killed": kill is not None,
            "killed_by": kill.property if kill else None,
            "examples_to_kill": sum(r.ran for r in found.results) if kill else None,
            "why": kill.why.splitlines()[0][:300] if kill else ""}


@dataclass(frozen=True)
class Domain:
    name: str
    module: str
    """The implementation module the mutants change (the zoo tests the suite, not --impl)."""
    properties: Callable[[], list[Property]]
    """Every property of the domain, in the order a hunt runs them."""
    mutants: tuple[Mutant, ...]
    scope: dict[str, Any] = field(default_factory=dict)
    """The draws' bounds when the target is a module, not a mutant."""


@dataclass
class Result:
    property: str
    ran: int = 0
    killed: bool = False
    examples_to_kill: int | None = None
    witness: Any = field(default=None, repr=False)
    why: str = ""
    failure: dict[str, Any] = field(default_factory=dict, repr=False)
    """The kill's ``Failure`` fields (property, record, dtype, case, error in u, category), if it was one."""
    prop: Property | None = field(default=None, repr=False)


@dataclass
class Hunt:
    target: str
    domain: str
    budget: int
    results: list[Result] = field(default_factory=list)

    @property
    def first_kill(self) -> Result | None:
        return next((r for r in self.results if r.killed), None)

    @property
    def killed(self) -> bool:
        return self.first_kill is not None


class _Enough(Exception):
    """Raised (not a failure) once a property has run the examples it was given."""


def default_budget() -> int:
    """The active hypothesis profile's examples per property."""
    return settings().max_examples


def _judge(prop: Property, impl: Impl, example: Any, out: Result) -> BaseException | None:
    """Run the body on one example; a failure (any exception but NotCovered) is recorded as the
    kill and returned."""
    out.ran += 1
    witness = copy.deepcopy(example)  # the body may write into its arguments
    try:
        with np.errstate(all="ignore"):  # mutants overflow by design; the property judges
            prop.judge(impl, example)
    except NotCovered:
        raise
    except Exception as exc:
        kind = "" if isinstance(exc, AssertionError) else f"{type(exc).__name__}: "
        out.killed, out.examples_to_kill, out.witness = True, out.ran, witness
        out.why = (kind + str(exc)).strip()
        found = failure_in(exc)
        out.failure = found.fields() if found is not None else {}
        return exc
    return None


def run_property(prop: Property, impl: Impl, budget: int, scope: dict[str, Any] | None = None) -> Result:
    """Run ``prop`` on ``impl``: its corners, then drawn examples until the first failure or
    ``budget`` of them (fewer if the property caps itself)."""
    out = Result(prop.name, prop=prop)
    limit = min(budget, prop.max_examples or budget)
    error: list[BaseException] = []
    try:
        for corner in prop.first_examples():
            if _judge(prop, impl, corner, out):
                return out
    except NotCovered:
        return Result(prop.name, prop=prop)
    drawn = [0]

    @seed(ZOO_SEED)
    @settings(max_examples=limit, derandomize=True, database=None, deadline=None,
              phases=(Phase.explicit, Phase.generate), report_multiple_bugs=False)
    @given(example=prop.example(**(scope or {})))
    def search(example):
        if error:  # hypothesis replays the failing example once
            raise error[0]
        if drawn[0] >= limit:
            raise _Enough
        drawn[0] += 1
        exc = _judge(prop, impl, example, out)
        if exc is not None:
            error.append(exc)
            raise exc

    try:
        search()
    except NotCovered:
        return Result(prop.name, prop=prop)
    except _Enough:
        pass
    except Exception:
        if not out.killed:  # hypothesis itself failed (health check, strategy error)
            raise
    return out


def _module(target: ModuleType | str) -> ModuleType:
    return importlib.import_module(target) if isinstance(target, str) else target


def hunt(target: Mutant | ModuleType | str, domain: Domain, budget: int | None = None, backend: str = "numpy",
         until_first_kill: bool | None = None, scope: dict[str, Any] | None = None,
         uses: frozenset[str] | None = None) -> Hunt:
    """Run the domain's properties against ``target`` (see the module docstring); ``scope``
    overrides the draws' bounds (default: the mutant's own, or the domain's); ``uses`` keeps
    only the properties whose bodies call one of these functions (default: a mutant's
    ``replaces``; every property for a module)."""
    budget = budget or default_budget()
    is_mutant = isinstance(target, Mutant)
    stop = is_mutant if until_first_kill is None else until_first_kill
    props = domain.properties()
    uses = uses if uses is not None else target.replaces if is_mutant else None
    if uses is not None:
        props = [p for p in props if p.functions() & uses]
    context = target.apply(_module(domain.module)) if is_mutant else contextlib.nullcontext(_module(target))
    name = target.name if is_mutant else getattr(target, "__name__", str(target))
    out = Hunt(name, domain.name, budget)
    with context as module:
        impl = Impl(module, backend)
        for prop in props:
            out.results.append(run_property(prop, impl, budget, scope if scope is not None else
                                            target.scope if is_mutant else domain.scope))
            if stop and out.results[-1].killed:
                break
    return out


def control(found: Hunt | list[Hunt], domain: Domain, backend: str = "numpy") -> list[Result]:
    """Replay every (property, witness) pair that killed against the unmutated implementation;
    the results that kill again are false alarms."""
    impl = Impl(_module(domain.module), backend)
    out = []
    for h in (found if isinstance(found, list) else [found]):
        for r in h.results:
            if not r.killed:
                continue
            res = Result(f"{h.target}: {r.property}", ran=1, prop=r.prop)
            try:
                r.prop.judge(impl, copy.deepcopy(r.witness))
            except NotCovered:
                pass
            except Exception as exc:
                res.killed, res.examples_to_kill, res.witness, res.why = True, 1, r.witness, str(exc).strip()
            out.append(res)
    return out
