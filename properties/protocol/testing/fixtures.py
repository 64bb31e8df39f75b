"""What the protocol's tests share: the pyharness judged as ``exec:``, and the fixture that keeps
its gaps out of the run's NOT COVERED list."""
from __future__ import annotations

import sys
from typing import Iterator

import pytest

from properties.backends import NOT_COVERED, Impl, load_impl
from properties.protocol.harness import exec_module

HARNESS = f"{sys.executable} -m properties.protocol.testing.pyharness"


_STARTED: list[Impl] = []


@pytest.fixture(autouse=True)
def own_not_covered() -> Iterator[None]:
    """These harnesses are the suite's own: what they lack is not the run's NOT COVERED list;
    each is closed when its test ends (not left to the run's end)."""
    before = set(NOT_COVERED)
    yield
    NOT_COVERED.intersection_update(before)
    while _STARTED:
        _STARTED.pop().module.HARNESS.close(grace_s=0.2)


def judged(fault: str | None = None, on: str = "top_p", functions: str = "softmax,top_p,dist", extra: str = "") -> Impl:
    """The pyharness judged as ``exec:`` (started with ``exec`` so that the harness, not ``sh``,
    holds its pipes: closing stdout is then seen as closed)."""
    extra += f" --fault {fault} --on {on}" if fault else ""
    impl = load_impl("gpu_impl", "numpy", exec_module(f"exec {HARNESS} --functions {functions}{extra}"))
    _STARTED.append(impl)
    return impl
