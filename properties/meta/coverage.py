"""Coverage by argument: which functions of the judged API the tests call, and with which values of
each parameter, read from a call log (``properties.backends.CALL_LOG_ENV``: one JSON line per
call through ``Impl``, written while the judged tests run).

A function is covered when some test that takes the implementation called it, and each of its
parameters was varied over its domain: a token history sent non-empty at least once, every
other scalar or per-row parameter sent with at least two distinct values (so t = 1 alone, no
penalty, one window size are gaps); data arrays (logits, uniforms, probabilities) vary by
construction and are not counted.
"""
from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from properties.protocol.signatures import table


@dataclass
class Seen:
    tests: set[str] = field(default_factory=set)
    values: dict[str, set] = field(default_factory=lambda: defaultdict(set))
    """parameter -> every fingerprint value seen ("ids", "empty", "array", "default", numbers)."""


def read_log(path: Path) -> dict[str, Seen]:
    seen: dict[str, Seen] = defaultdict(Seen)
    for line in path.read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        s = seen[row["fn"]]
        s.tests.add(row["test"])
        for name, fp in row["args"].items():
            s.values[name].update(fp if isinstance(fp, list) else [fp])
    return seen


def gaps(functions: Iterable[str], seen: dict[str, Seen]) -> list[str]:
    """One line per function never called, or parameter never varied over its domain."""
    params = {row.qualified: [n for n, _ in row.params] for row in table()}
    out = []
    for fn in functions:
        if fn not in seen or not seen[fn].tests:
            out.append(f"{fn}: called by no test that judges the implementation")
            continue
        for name in params[fn]:
            vals = seen[fn].values.get(name, set())
            out += [f"{fn}({name}=...): {why}" for why in [_unvaried(vals)] if why]
    return out


def _unvaried(vals: set[Any]) -> str | None:
    if not vals or vals == {"default"}:
        return "never sent (its default only)"
    if vals <= {"array"}:
        return None
    if vals & {"ids", "empty"}:
        return None if "ids" in vals else "the history is always empty"
    distinct = vals - {"array"}
    return None if len(distinct) >= 2 else f"always {sorted(distinct, key=str)[0]!r}"
