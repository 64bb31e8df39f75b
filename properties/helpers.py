"""Small glue shared by the test modules (pytest-facing; checks.py stays pytest-free)."""
from __future__ import annotations

import importlib
from contextlib import contextmanager

import pytest

from properties.backends import NOT_COVERED, Impl, NotCovered, load_impl
from properties.catalogue.record import SamplerRecord
from properties.strategies import FAMILIES, cases


@contextmanager
def covered():
    """Turn a missing impl function into a visible 'not covered' skip."""
    try:
        yield
    except NotCovered as exc:
        pytest.skip(f"NOT COVERED: {exc}")


def record_cases(record: SamplerRecord, dtype: str, **kw):
    return cases(record.params, families=record.families or tuple(FAMILIES), dtypes=(dtype,), **kw)


def params_for(records, dtypes=True):
    """pytest parameters (record, dtype) with readable ids."""
    out = []
    for r in records:
        for d in (r.dtypes if dtypes else ("float32",)):
            out.append(pytest.param(r, d, id=f"{r.name}-{d}"))
    return out


def submodule_impl(impl: Impl, part: str) -> Impl:
    """The implementation's ``part`` module (``--impl gpu_impl`` -> ``gpu_impl.ops``), or a visible
    NOT COVERED skip when the implementation has none."""
    name = f"{impl.name}.{part}"
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name not in (name, impl.name):
            raise
        NOT_COVERED.add(name)
        pytest.skip(f"NOT COVERED: {impl.name} has no {part} module")
    return load_impl(name, impl.backend, module)
