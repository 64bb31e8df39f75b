"""pytest glue for the quantization tests: the ``qimpl`` fixture (``<--impl>.quants`` on the
chosen backend) and parameter lists."""
from __future__ import annotations

import importlib

import pytest

from properties.backends import NOT_COVERED, load_impl


@pytest.fixture(scope="session")
def qimpl(impl):
    """The implementation's quantization module: ``--impl gpu_impl`` -> ``gpu_impl.quants``."""
    name = f"{impl.name}.quants"
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name not in (name, impl.name):
            raise
        NOT_COVERED.add(name)
        pytest.skip(f"NOT COVERED: {impl.name} has no quants module")
    return load_impl(name, impl.backend, module)


def record_params(records):
    return [pytest.param(r, id=r.name) for r in records]
