"""pytest glue for the quantization tests: the ``qimpl`` fixture (``<--impl>.quants`` on the
chosen backend) and parameter lists."""
from __future__ import annotations

import pytest

from properties.plugin import submodule_impl


@pytest.fixture(scope="session")
def qimpl(impl):
    """The implementation's quantization module: ``--impl gpu_impl`` -> ``gpu_impl.quants``."""
    return submodule_impl(impl, "quants")


def record_params(records):
    return [pytest.param(r, id=r.name) for r in records]
