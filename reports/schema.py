"""results.json, schema version 2: what a run measured. Written by the pytest plugin
(``pytest --lc-results PATH``, merged across pytest-xdist workers) and so by ``logitcheck report``,
which runs pytest with that option; read by the report and by ``--baseline``.

Top level::

  schema_version  2 (a file without it is version 1: the same lists, fewer fields; still rendered)
  meta            the run's identity
    impl, backend     module judged and its array backend ("numpy" | "cupy" | "emulated")
    device            "CPU via NumPy (x86_64, 2 cores)" or the CUDA device's name, or why there is none
    profile           hypothesis profile (dev | ci | nightly); derandomized: true if examples are fixed
    contract          the numerics contract judged under (default | strict; properties/numerics/)
    seed              --hypothesis-seed (null when derandomized, or when none was given)
    selection         "-k EXPR and -m EXPR" as given, "" for the whole suite
    workers           pytest-xdist worker count (1 without -n)
    date, duration_s  start (ISO 8601, UTC) and wall time of the pytest session
    pytest_exit       pytest's exit status (0 all passed, 1 some failed, 2 interrupted, ...)
    versions          {distribution: version} for python, numpy, hypothesis, cupy, llama-cpp-python, ...
    not_covered       functions the implementation lacks (their tests were skipped, not passed)
    reproduce         command that reruns one test as this run ran it; "{nodeid}" is the placeholder
    error             (report only) why the suite could not run or wrote nothing
  tests           one row per test: nodeid, outcome (passed | failed | skipped | error), duration (s),
                  reason (skip reason, or the failure's crash line then the trace's head and tail,
                  <= 2,000 characters), judged (true when the test takes the implementation: impl,
                  oimpl or qimpl; the first screen counts what judged it); cases ({judged, of}: only on
                  a test some of whose cases the implementation answered unsupported, the others
                  judged: NOT COVERED per case); failed rows also carry
    failure           the fields of the check's ``properties.failure.Failure``: {property, record, dtype,
                      case, why, category, rerun, and error_u, bound_u, ratio only when the property
                      measured an error in units of u}; the case is hypothesis' shrunk example (its
                      repr is a replay recipe); category is one of ``failure.CATEGORIES``. A failure
                      that is no Failure (a bare assert) has only case: hypothesis' falsifying example.
                      Files written before these fields carry worst_u for error_u
    reproduce         the one-line command for this test (the failure's rerun)
  worst_error     one row per (record, property, dtype) that measured an error in u:
    worst_u, bound_u, ratio  the example closest to (or furthest past) its bound; ratio = worst_u / bound_u
    n                 examples measured
    ratio_hist, u_hist  {bin: examples} of each example's error / bound and error in u; bin "k" holds
                      (10^(k/4), 10^((k+1)/4)], bin "-24" everything smaller, "36" larger finites;
                      "zero", "inf" and "nan" are their own bins
    ratio_p50, ratio_p90, ratio_p99  upper edges of the bins holding those quantiles (upper bounds)
    bound_u_min, bound_u_max  range of the bound over the examples (it grows with size and conditioning)
    worst_cases       up to 3 worst examples: {ratio, worst_u, bound_u, test (nodeid), case (repr)}
  examples        one row per (record, property): count of examples run (exact properties included),
                  test: the first nodeid (in sort order) that ran them
  histogram_bins  {per_decade, lowest, highest}: the bin layout above
  tables          {name: value} tables the properties recorded (order matrix, zoo kills, findings, ...)

Numbers may be NaN or Infinity (Python's JSON extension): a NaN error is a measured fact.
"""
from __future__ import annotations

from typing import Any

SCHEMA_VERSION = 2
TOP_LEVEL = ("meta", "tests", "worst_error", "examples", "tables")
META_V2 = ("impl", "backend", "device", "profile", "derandomized", "seed", "selection", "workers", "date",
           "duration_s", "pytest_exit", "versions", "not_covered", "reproduce")
WORST_V2 = ("record", "property", "dtype", "worst_u", "bound_u", "ratio", "n", "ratio_hist", "u_hist",
            "ratio_p50", "ratio_p90", "ratio_p99", "bound_u_min", "bound_u_max", "worst_cases")
OUTCOMES = ("passed", "failed", "skipped", "error")


def version_of(results: dict[str, Any]) -> int:
    v = results.get("schema_version", 1)
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def problems(results: Any) -> list[str]:
    """Everything in ``results`` that version 2 of the schema does not allow (empty: it conforms)."""
    if not isinstance(results, dict):
        return [f"results.json must hold an object, not {type(results).__name__}"]
    out = []
    if version_of(results) != SCHEMA_VERSION:
        out.append(f"schema_version is {results.get('schema_version')!r}, expected {SCHEMA_VERSION}")
    for key in TOP_LEVEL:
        kind = dict if key in ("meta", "tables") else list
        if not isinstance(results.get(key), kind):
            out.append(f"{key} must be a {kind.__name__}")
    meta = results.get("meta") if isinstance(results.get("meta"), dict) else {}
    out += [f"meta.{k} is missing" for k in META_V2 if k not in meta]
    for i, t in enumerate(results.get("tests") or []):
        if not isinstance(t, dict) or not {"nodeid", "outcome", "duration", "reason"} <= set(t):
            out.append(f"tests[{i}] lacks nodeid/outcome/duration/reason")
        elif t["outcome"] not in OUTCOMES:
            out.append(f"tests[{i}].outcome {t['outcome']!r} is not one of {OUTCOMES}")
        elif t["outcome"] == "failed" and not ({"failure", "reproduce"} <= set(t)):
            out.append(f"tests[{i}] failed but has no failure/reproduce")
    for i, w in enumerate(results.get("worst_error") or []):
        missing = [k for k in WORST_V2 if not isinstance(w, dict) or k not in w]
        if missing:
            out.append(f"worst_error[{i}] lacks {', '.join(missing)}")
        elif sum(w["ratio_hist"].values()) != w["n"] or sum(w["u_hist"].values()) != w["n"]:
            out.append(f"worst_error[{i}]: histogram counts do not add up to n")
    return out
