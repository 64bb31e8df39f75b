"""pytest glue for the ops tests: the ``oimpl`` fixture (``<--impl>.ops`` on the chosen
backend), parameter lists, and a helper that records a check's measurement."""
from __future__ import annotations

import importlib

import pytest

from properties.backends import NOT_COVERED, load_impl
from properties.catalogue.ops import OP_RECORDS, OpRecord
from properties.helpers import covered  # noqa: F401  (re-exported for the ops tests)
from properties.ops_errors import note


@pytest.fixture(scope="session")
def oimpl(impl):
    """The implementation's ops module: ``--impl gpu_impl`` -> ``gpu_impl.ops``."""
    name = f"{impl.name}.ops"
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name not in (name, impl.name):
            raise
        NOT_COVERED.add(name)
        pytest.skip(f"NOT COVERED: {impl.name} has no ops module")
    return load_impl(name, impl.backend, module)


def record_dtype_params(records: list[OpRecord] = OP_RECORDS):
    return [pytest.param(r, d, id=f"{r.name}-{d}") for r in records for d in r.dtypes]


def dtype_params(dtypes=("float32", "float16", "bfloat16")):
    return [pytest.param(d, id=d) for d in dtypes]


def measured(op: str, prop: str, dtype: str, result) -> None:
    note(op, prop, dtype, *(result if result is not None else (None, None)))
