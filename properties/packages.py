"""The top-level packages the logitcheck distribution installs, and the guard against a module of
the same name that shadows one of them.

The card keeps its folders at the top (``oracle``, ``gpu_impl``, ``properties``, ``fixtures``,
``reports``), so the install puts five common names into the engine's environment. Moving them
under one namespace would touch every import of the suite; instead every entry point (the
``logitcheck`` command, the pytest plugin) checks that each name resolves to the folder that
holds this ``properties``, and stops with one clear message naming the other module otherwise:
an engine repository's own ``fixtures/`` package, found first because ``python -m pytest`` puts
the working directory on ``sys.path``, would else surface as an ImportError deep in the suite.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

PACKAGES = ("oracle", "gpu_impl", "properties", "fixtures", "reports")
"""As ``[tool.setuptools.packages.find] include`` in pyproject.toml lists them (a meta test holds it)."""


def _location(name: str) -> Path | None:
    """The folder package ``name`` is (or would be) imported from, without importing it."""
    module = sys.modules.get(name)
    origin = getattr(module, "__file__", None) if module is not None else None
    if origin is None:
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            return None
        if spec is not None and spec.origin is None and spec.submodule_search_locations:
            return Path(list(spec.submodule_search_locations)[0]).resolve()  # a namespace package
        origin = spec.origin if spec is not None else None
    return Path(origin).resolve().parent if origin else None


def shadowed() -> list[str]:
    """One message per installed package that another module shadows (empty: none does)."""
    home = Path(__file__).resolve().parent.parent
    out = []
    for name in PACKAGES:
        where = _location(name)
        if where is None:
            out.append(f"logitcheck's package {name!r} cannot be found (expected in {home}): reinstall logitcheck")
        elif where != home / name:
            out.append(f"the module {name!r} at {where} shadows logitcheck's package {name!r} (in {home}): "
                       f"rename your module, or run logitcheck from a directory (and PYTHONPATH) without it")
    return out


def checkout_env(**extra: str) -> dict[str, str]:
    """The environment for a child Python that must import this checkout's packages: the checkout
    first on ``PYTHONPATH``, the caller's own entries kept after it (a run that found its
    dependencies through ``PYTHONPATH``, as the device image's does, would else lose them)."""
    import os

    root = str(Path(__file__).resolve().parents[1])
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, **extra}
