"""Same seed, same examples, whatever else the process has loaded.

Hypothesis draws a share of its values from constants it reads in the source of the local modules
loaded at the time (``properties.profiles._draws_independent_of_loaded_modules`` holds that pool
empty). Which modules are loaded depends on the selection, the order and the xdist split, so
without it a ci run and the ``logitcheck rerun`` of one of its tests could draw different
examples from the same seed."""
from __future__ import annotations

import importlib
import sys

from hypothesis import given, settings, strategies as st
from hypothesis.internal.conjecture import providers

from properties import profiles  # noqa: F401  (the pool is held empty on import)


def _draws() -> list:
    seen: list = []

    @settings(derandomize=True, database=None, max_examples=300, deadline=None)
    @given(st.integers(0, 10**6), st.floats(-1e6, 1e6))
    def draw(i: int, f: float) -> None:
        seen.append((i, f))

    draw()
    return seen


def test_the_pool_hook_is_still_there():
    """Where hypothesis renames its hook, the pool is no longer held and the test below would pass
    only by chance of what is loaded: this says so first."""
    assert hasattr(providers, "_get_local_constants") and hasattr(providers, "Constants"), \
        "hypothesis no longer has providers._get_local_constants: see properties/profiles.py"


def test_draws_do_not_depend_on_the_modules_loaded(tmp_path, monkeypatch):
    """Fails without the empty pool: the second run's draws differ once a module holding 600
    integer and float constants in range is imported between the two runs (hypothesis reads at
    most 1,024 constants from a module, none from a module with more)."""
    before = _draws()
    name = "lc_module_full_of_constants"
    values = ", ".join(f"{i * 499}, {i * 0.5 + 0.25}" for i in range(1, 301))
    (tmp_path / f"{name}.py").write_text(f"VALUES = ({values})\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        importlib.import_module(name)
        assert _draws() == before
    finally:
        sys.modules.pop(name, None)
