"""What a run measured, for the report: worst error per (record, property, dtype), the order
matrix, zoo kills. Checks call ``note``; the plugin writes everything to ``--lc-results``."""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

from properties.errors import ErrorReport

WORST: dict[tuple[str, str, str], dict[str, Any]] = {}
EXAMPLES: dict[tuple[str, str], int] = defaultdict(int)
TABLES: dict[str, Any] = {}


def note(record: str, prop: str, dtype: str, report: ErrorReport | None = None) -> None:
    """Count one example, and keep the worst error report seen for (record, property, dtype)."""
    EXAMPLES[(record, prop)] += 1
    if report is None:
        return
    key = (record, prop, dtype)
    best = WORST.get(key)
    if best is None or report.ratio > best["ratio"]:
        WORST[key] = {"worst_u": report.worst_u, "bound_u": report.bound_u, "ratio": report.ratio}


def table(name: str, value: Any) -> None:
    """Store a named result table (order matrix, zoo kills, peer findings)."""
    TABLES[name] = value


def dump(path: Path, outcomes: list[dict[str, Any]], meta: dict[str, Any]) -> None:
    data = {
        "meta": meta,
        "tests": outcomes,
        "worst_error": [{"record": r, "property": p, "dtype": d, **v} for (r, p, d), v in sorted(WORST.items())],
        "examples": [{"record": r, "property": p, "count": n} for (r, p), n in sorted(EXAMPLES.items())],
        "tables": TABLES,
    }
    path.write_text(json.dumps(data, indent=1, default=str))
