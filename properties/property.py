"""One property of the judge, the one type every room's table is made of (samplers, ops, quants,
speculative, logprobs) and the bug zoo runs.

A property is judged at a *point*: what its room parametrizes it by ((record, dtype) for a
sampler, a dtype for an op, a format record for a quant, nothing for speculative decoding and
logprobs). ``draw`` and ``body`` take the point; ``at(point)`` fixes it, which is how the tests'
parameters and the zoo's hunts name one runnable property (``example``, ``judge``).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from hypothesis import strategies as st


def _nothing(point: Any) -> tuple:
    return ()


def _everywhere(record: Any) -> bool:
    return True


def _one_point() -> tuple:
    return (None,)


@dataclass(frozen=True)
class Property:
    name: str
    draw: Callable[..., st.SearchStrategy]
    """(point, **scope) -> a strategy of one example; ``scope`` bounds the draw (a zoo mutant
    needs a vocabulary above 1000, say)."""
    body: Callable[[Any, Any, Any], Any]
    """(impl, point, example) -> what it measured (ErrorReports, (ErrorReport, err_u), or None);
    raises ``properties.failure.Failure`` when the property says no."""
    uses: frozenset[str] | Callable[[Any], frozenset[str]] = frozenset()
    """The implementation functions the body calls (or point -> those): a bug in any of them is
    this property's to find, and a zoo mutant is hunted only by the properties that call it."""
    points: Callable[[], Sequence[Any]] = _one_point
    """The points the room judges it at (an op's dtypes, a quant property's formats)."""
    applies: Callable[[Any], bool] = _everywhere
    """Which records it judges (a sampler property fits some kinds of sampler only)."""
    max_examples: int | None = None
    """A smaller example budget where one example is expensive."""
    corners: Callable[[Any], tuple] = _nothing
    """point -> examples every run visits first, whatever the budget (a sampler's hard corners)."""
    subject: str = ""
    """The record it is recorded under when the point names none (an op, ``softmax``, ``dist``)."""
    group: str = ""
    """Which of the room's test files runs it (ops: "ops" or "attention")."""
    label: str = ""
    """The results' dtype column when the point carries no dtype (a quant: "raw" or "float32")."""
    point: Any = None
    """The point ``at`` fixed (None: a property judged at one point only)."""

    def at(self, point: Any, name: str | None = None) -> "Property":
        """This property at ``point`` (named ``name``, e.g. ``top_k/float16``, in zoo tables)."""
        return dataclasses.replace(self, point=point, name=name or self.name)

    def example(self, **scope: Any) -> st.SearchStrategy:
        return self.draw(self.point, **scope)

    def judge(self, impl: Any, example: Any) -> Any:
        return self.body(impl, self.point, example)

    def functions(self) -> frozenset[str]:
        """``uses`` at this property's point."""
        return self.uses(self.point) if callable(self.uses) else self.uses

    def first_examples(self) -> tuple:
        return self.corners(self.point)

    def __repr__(self) -> str:
        return self.name

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:  # hypothesis prints parameters with this
        p.text(self.name)
