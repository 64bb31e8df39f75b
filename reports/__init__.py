"""logitcheck's report: the ``logitcheck`` console script and the results.json → HTML renderer."""
from __future__ import annotations

from pathlib import Path


def version() -> str:
    """The installed distribution's version, or the source tree's pyproject version."""
    try:
        from importlib.metadata import PackageNotFoundError, version as dist_version

        return dist_version("logitcheck")
    except PackageNotFoundError:
        pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
        try:
            import tomllib

            return tomllib.loads(pyproject.read_text())["project"]["version"] + " (source tree)"
        except (ImportError, OSError, KeyError, ValueError):
            return "unknown"
