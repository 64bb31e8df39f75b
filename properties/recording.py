"""What a run measured, for the report: worst error per (record, property, dtype), histograms of
the ops' errors in u, the order matrix, zoo kills. Checks call ``note`` (or ``note_errors`` with
every element's error); the plugin writes everything to ``--lc-results``."""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from properties.numerics import ErrorReport

WORST: dict[tuple[str, str, str], dict[str, Any]] = {}
EXAMPLES: dict[tuple[str, str], int] = defaultdict(int)
TABLES: dict[str, Any] = {}
# error histogram bins in u: 0, (0, 1e-3], then 5 % wide log bins to 1e9, then beyond
_EDGES = np.concatenate([[0.0, 1e-3], np.logspace(-3, 9, 241)[1:], [np.inf]])
_HIST: dict[str, dict[str, Any]] = {}


def note(record: str, prop: str, dtype: str, report: ErrorReport | None = None) -> None:
    """Count one example, and keep the worst error report seen for (record, property, dtype)."""
    EXAMPLES[(record, prop)] += 1
    if report is None:
        return
    key = (record, prop, dtype)
    best = WORST.get(key)
    if best is None or report.ratio > best["ratio"]:
        WORST[key] = {"worst_u": report.worst_u, "bound_u": report.bound_u, "ratio": report.ratio}


def note_errors(op: str, prop: str, dtype: str, report: ErrorReport | None, err_u: np.ndarray | None = None) -> None:
    """``note``, and add every element's error in u to the (op, property, dtype) histogram
    (the report shows its max and percentiles, not only pass/fail)."""
    note(op, prop, dtype, report)
    if err_u is None or err_u.size == 0:
        return
    key = f"{op}|{prop}|{dtype}"
    h = _HIST.setdefault(key, {"counts": np.zeros(_EDGES.size - 1, dtype=np.int64), "max": 0.0,
                               "worst_ratio": 0.0})
    h["counts"] += np.histogram(err_u, bins=_EDGES)[0]
    h["max"] = max(h["max"], float(err_u.max()))
    if report is not None:
        h["worst_ratio"] = max(h["worst_ratio"], report.ratio)
    table("ops_error_u", error_summary())


def _quantile(counts: np.ndarray, q: float) -> float:
    cum = np.cumsum(counts)
    k = int(np.searchsorted(cum, q * cum[-1]))
    return float(_EDGES[min(k + 1, _EDGES.size - 2)])  # upper edge of the bin: a bound, not a guess


def error_summary() -> dict[str, dict[str, float]]:
    """Per 'op|property|dtype': elements compared, max error in u, p50/p90/p99 (bin upper
    edges, 5% resolution), and the worst error as a fraction of the model's bound."""
    out = {}
    for key, h in sorted(_HIST.items()):
        c = h["counts"]
        out[key] = {"elements": int(c.sum()), "max_u": h["max"], "p50_u": _quantile(c, 0.5),
                    "p90_u": _quantile(c, 0.9), "p99_u": _quantile(c, 0.99), "worst_of_bound": h["worst_ratio"]}
    return out


_ROBUST: dict[tuple[str, str], dict[str, Any]] = {}


def robustness(section: str, subject: str, held: bool, what: str) -> None:
    """Grade one out-of-contract input (``section``: "bad input" or "outside the domain"): whether
    the implementation did what the strict contract asks (refused it, or stayed within the
    model past overflow). Shown as a pass rate per subject; never a failure of the numerics."""
    row = _ROBUST.setdefault((section, subject), {"section": section, "subject": subject, "checked": 0,
                                                  "held": 0, "first_miss": ""})
    row["checked"] += 1
    row["held"] += int(held)
    if not held and not row["first_miss"]:
        row["first_miss"] = what[:300]
    table("robustness", [dict(r, pass_rate=round(r["held"] / r["checked"], 4)) for _, r in sorted(_ROBUST.items())])


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
