"""A pytest plugin for judging llama.cpp itself through the protocol: a failure whose case
witnesses a ledger finding is reported as that finding, by id, not as a judge failure.

    python -m pytest ... --impl "exec:python examples/llama_cpp/harness.py" \\
        -p properties.peers.llama_cpp.filed_as_findings

The match is data: the failing ``Failure``'s record (the judged function), the row it names and
that row's parameters, tested against each ledger entry's ``shows_on`` (``finding_rows``). A filed
failure becomes an expected failure whose reason lists the finding ids; anything else stays a
failure. With ``LOGITCHECK_FILED_OUT`` set, one JSON line per judged test goes to that file:
``{"nodeid", "outcome", "findings", "property"}``.
"""
from __future__ import annotations

import dataclasses
import json
import os
from typing import Any, Iterator

import numpy as np
import pytest

from properties.failure import NO_CASE, Failure, failure_in

FILED_OUT = "LOGITCHECK_FILED_OUT"
REASON = "llama.cpp finding "


def calls(failure: Failure) -> Iterator[tuple[str, np.ndarray, dict[str, Any]]]:
    """(judged function, row as the engine got it, that row's parameters) for the row(s) the
    failure names: a samplers ``Case`` (its ``row``, or every row) or a chain case."""
    case = failure.case
    if case is NO_CASE or case is None:
        return
    if hasattr(case, "chain") and hasattr(case, "row"):  # a whole-chain case: one row, ChainParams
        yield failure.record, np.asarray(case.row, dtype=np.float32), dataclasses.asdict(case.chain)
        return
    if hasattr(case, "row_params") and hasattr(case, "logits"):
        rows = [failure.row] if failure.row is not None else range(np.shape(case.logits)[0])
        for b in rows:
            yield failure.record, np.asarray(case.logits[b], dtype=np.float32), case.row_params(b)


def explain(failure: Failure) -> list[str]:
    """The ledger ids whose ``shows_on`` holds on a call of the failure (empty: unexplained)."""
    from properties.peers.llama_cpp.findings import FINDINGS

    found = []
    for function, row, params in calls(failure):
        found += [f.id for f in FINDINGS if f.shows_on is not None and f.shows_on(function, row, params)]
    return sorted(set(found))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> Iterator[None]:
    outcome = yield
    rep = outcome.get_result()
    if rep.when != "call" and not rep.failed:
        return
    failure = failure_in(call.excinfo.value) if rep.failed and call.excinfo is not None else None
    ids = explain(failure) if failure is not None else []
    if ids:
        rep.outcome, rep.wasxfail = "skipped", REASON + ", ".join(ids)
    path = os.environ.get(FILED_OUT)
    if path and (rep.when == "call" or rep.failed):
        with open(path, "a") as out:
            out.write(json.dumps({"nodeid": rep.nodeid, "outcome": "finding" if ids else rep.outcome,
                                  "findings": ids, "property": failure.head if failure is not None else ""}) + "\n")
