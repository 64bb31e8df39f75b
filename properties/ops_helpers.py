"""pytest glue for the ops tests: the ``oimpl`` fixture (``<--impl>.ops`` on the chosen
backend), parameter lists, and a helper that records a check's measurement."""
from __future__ import annotations

import pytest

from properties import recording
from properties.helpers import covered, submodule_impl
from properties.recording import note_errors as note
from properties.ops_properties import OpProperty, properties


@pytest.fixture(scope="session")
def oimpl(impl):
    """The implementation's ops module: ``--impl gpu_impl`` -> ``gpu_impl.ops``."""
    return submodule_impl(impl, "ops")


def property_params(group: str):
    return [pytest.param(p, d, id=f"{p.name}-{d}") for p in properties(group) for d in p.dtypes]


def run_property(oimpl, prop: OpProperty, dtype: str, data) -> None:
    """Draw one example, run the property, record what it measured."""
    example = data.draw(prop.draw(dtype), label="example")
    with covered():
        result = prop.body(oimpl, example)
    if result is None:
        recording.note(prop.op, prop.name, dtype)
    else:
        note(prop.op, prop.name, dtype, *result)
