"""Coverage by argument of every function of the signature table: the judged tests of the rooms
that take the implementation (samplers, ops, quants, engines, speculative) run in subprocesses
with the call log on (``properties.backends.CALL_LOG_ENV``), and every function must have been
called by a test that takes the implementation, with each parameter varied over its domain
(``properties/meta/coverage.py``). The engine and speculative rooms' log also gives the table of
optional arguments each test sends, which docs/judge-your-engine.md must hold as generated."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from properties.packages import checkout_env
from properties.backends import CALL_LOG_ENV
from properties.meta.coverage import gaps, optional_sent, optional_table, read_log, table_in
from properties.profiles import current_profile
from properties.protocol.signatures import table

ROOT = Path(__file__).resolve().parents[2]
ROOMS = (("properties/samplers", "properties/ops", "properties/quants"), ("properties/engines",),
         ("properties/speculative",))
DOC = ROOT / "docs" / "judge-your-engine.md"
SCOPE = tuple(r.qualified for r in table())
DOC_SCOPE = tuple(f for f in SCOPE if f.startswith("engines.") or f == "rejection_sample")
"""The functions whose optional arguments the doc's table lists (the engine variants and drafts)."""


def test_every_function_is_judged_at_every_argument(tmp_path):
    log = tmp_path / "calls.jsonl"
    env = checkout_env(**{CALL_LOG_ENV: str(log)})
    # one process per group: measured, the engine and speculative rooms in one process stalled after 25 min
    for rooms in ROOMS:
        proc = subprocess.run([sys.executable, "-m", "pytest", *rooms, "--judged-only", "-q", "-p", "no:cacheprovider",
                               "-n", "0", f"--hypothesis-profile={current_profile()}", "-W", "ignore"],
                              cwd=ROOT, env=env, capture_output=True, text=True, timeout=1800)
    assert log.exists(), f"no call was logged:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}"
    missing = gaps(SCOPE, read_log(log))
    want = optional_table(optional_sent(log, DOC_SCOPE))
    assert not missing, "functions or arguments no test judges:\n  " + "\n  ".join(missing)
    assert table_in(DOC) == want, f"{DOC.name}'s table of optional arguments is stale; it is now:\n{want}"
