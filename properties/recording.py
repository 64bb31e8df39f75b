"""What a run measured, written to ``--lc-results`` as results.json (schema version 2, documented
field by field in ``reports/schema.py``).

Checks call ``note`` (one example, with its ErrorReport when the property measures an error in u)
and ``table`` (a named result table). Per (record, property, dtype) the run keeps the worst error,
fixed-bin histograms of every example's error in u and of its error / bound, and the few worst
examples with the case that produced them: enough to draw the distribution, a few hundred bytes per
key whatever the example count. The state is plain data so that pytest-xdist workers can ship it to
the controller, where ``absorb`` combines workers independently of which worker ran what.
"""
from __future__ import annotations

import datetime as dt
import json
import math
import os
import platform
import shlex
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

from properties.backends import NOT_COVERED, cupy_device_reason, cupy_or_none
from properties.failure import case_repr, failure_in
from properties.measure import ErrorReport

SCHEMA_VERSION = 2
BINS_PER_DECADE = 4            # bin k holds (10^(k/4), 10^((k+1)/4)]: quantiles to within a factor 1.78,
                               # and a ratio of exactly 1 (at the bound) falls in a bin that ends at 1
BIN_LO, BIN_HI = -24, 36       # 1e-6 .. 1e9; smaller positives join bin -24, larger finites bin 36
WORST_KEPT = 3                 # worst examples kept per key, with their cases

WORST: dict[tuple[str, str, str], dict[str, Any]] = {}
EXAMPLES: dict[tuple[str, str], int] = defaultdict(int)
FIRST_TEST: dict[tuple[str, str], str] = {}  # (record, property) -> first nodeid (in sort order) noting it
TABLES: dict[str, Any] = {}
# error histogram bins in u: 0, (0, 1e-3], then 5 % wide log bins to 1e9, then beyond
_EDGES = np.concatenate([[0.0, 1e-3], np.logspace(-3, 9, 241)[1:], [np.inf]])
_HIST: dict[str, dict[str, Any]] = {}
CURRENT_TEST = ""              # set by the plugin: the nodeid whose examples are being noted
_STARTED, _T0 = dt.datetime.now(dt.timezone.utc), time.monotonic()  # imported when pytest loads the plugin


def bin_key(x: float) -> str:
    """The histogram bin of a non-negative error (in u, or as a fraction of the bound)."""
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf"
    if x <= 0:
        return "zero"
    k = math.ceil(BINS_PER_DECADE * math.log10(x)) - 1
    return str(min(max(k, BIN_LO), BIN_HI))


def bin_upper(key: str) -> float:
    """The largest value a bin can hold (quantiles read from a histogram are these upper edges)."""
    if key == "zero":
        return 0.0
    if key in ("inf", "nan") or int(key) >= BIN_HI:
        return math.inf if key != "nan" else math.nan
    return 10.0 ** ((int(key) + 1) / BINS_PER_DECADE)


_SPECIAL_BINS = {"zero": -math.inf, "inf": 1e300, "nan": math.inf}  # 0 first, then numbers, ∞, NaN last


def _bin_order(key: str) -> float:
    return _SPECIAL_BINS[key] if key in _SPECIAL_BINS else float(key)


def quantile(hist: dict[str, int], q: float) -> float | None:
    """Upper edge of the bin holding the q-quantile (an upper bound on it); NaN counts as the worst."""
    total = sum(hist.values())
    if not total:
        return None
    seen = 0
    for key in sorted(hist, key=_bin_order):
        seen += hist[key]
        if seen >= q * total:
            return bin_upper(key)
    return bin_upper(max(hist, key=_bin_order))


def _rank(x: float) -> float:
    """Sort key for 'worse': NaN is worse than any number (it is never within a model)."""
    return math.inf if math.isnan(x) else x


def _fold(entry: dict[str, Any], ratio: float, worst_u: float, bound_u: float, examples: list[dict]) -> None:
    """Add one or more worst-example candidates; keep the WORST_KEPT worst in a fixed order."""
    pool = {(e.get("test"), e.get("case"), e.get("ratio")): e for e in entry["worst_cases"] + examples}
    ranked = sorted(pool.values(), key=lambda e: (-_rank(e["ratio"]), str(e.get("test")), str(e.get("case"))))
    entry["worst_cases"] = ranked[:WORST_KEPT]  # distinct examples: exact ones are often many equal rows
    if (_rank(ratio), worst_u, -bound_u) > (_rank(entry["ratio"]), entry["worst_u"], -entry["bound_u"]):
        entry.update(worst_u=worst_u, bound_u=bound_u, ratio=ratio)


def _new_entry() -> dict[str, Any]:
    return {"worst_u": -math.inf, "bound_u": math.inf, "ratio": -math.inf, "n": 0, "u_hist": {}, "ratio_hist": {},
            "bound_u_min": math.inf, "bound_u_max": -math.inf, "worst_cases": []}


def _first_test(key: tuple[str, str], test: str) -> None:
    if test and (key not in FIRST_TEST or test < FIRST_TEST[key]):
        FIRST_TEST[key] = test


def note(record: str, prop: str, dtype: str, report: ErrorReport | None = None, case: Any = None) -> None:
    """Count one example; with a report, add its error to (record, property, dtype)'s histograms,
    and keep ``case`` (the drawn example, passed by the caller) if it is among the worst."""
    EXAMPLES[(record, prop)] += 1
    _first_test((record, prop), CURRENT_TEST)
    if report is None:
        return
    e = WORST.setdefault((record, prop, dtype), _new_entry())
    ratio, worst_u, bound_u = float(report.ratio), float(report.worst_u), float(report.bound_u)
    e["n"] += 1
    for hist, x in (("u_hist", worst_u), ("ratio_hist", ratio)):
        k = bin_key(x)
        e[hist][k] = e[hist].get(k, 0) + 1
    e["bound_u_min"], e["bound_u_max"] = min(e["bound_u_min"], bound_u), max(e["bound_u_max"], bound_u)
    enters = len(e["worst_cases"]) < WORST_KEPT or _rank(ratio) >= _rank(e["worst_cases"][-1]["ratio"])
    example = {"ratio": ratio, "worst_u": worst_u, "bound_u": bound_u, "test": CURRENT_TEST,
               "case": case_repr(case) if enters else ""}
    _fold(e, ratio, worst_u, bound_u, [example] if enters else [])


def note_errors(op: str, prop: str, dtype: str, report: ErrorReport | None, err_u: np.ndarray | None = None,
                case: Any = None) -> None:
    """``note``, and add every element's error in u to the (op, property, dtype) histogram
    (the report shows its max and percentiles, not only pass/fail)."""
    note(op, prop, dtype, report, case)
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


# --- failures: the fields of the check's Failure --------------------------------------------------
def failure_fields(exc: BaseException | None, notes: tuple[str, ...] = ()) -> dict[str, Any]:
    """What a failed test's exception says, for its results row: a ``Failure``'s fields (property,
    record, dtype, case, why, error_u / bound_u / ratio when measured, category, rerun). Any other
    exception (a bare assert in a test body) has none of them; hypothesis' own note naming the
    falsifying example, when it made one, stands as its case."""
    found = failure_in(exc)
    if found is not None:
        return found.fields()
    falsifying = next((n for n in notes if n.startswith("Falsifying example")), "")
    return {"case": case_repr(falsifying)} if falsifying else {}


# --- state: snapshot on a worker, absorb on the controller, dump once ------------------------------
def snapshot() -> str:
    """This process's measurements as JSON text (xdist ships it from worker to controller)."""
    return json.dumps({"worst": [[list(k), v] for k, v in WORST.items()],
                       "examples": [[list(k), n, FIRST_TEST.get(k, "")] for k, n in EXAMPLES.items()],
                       "tables": TABLES,
                       "not_covered": sorted(NOT_COVERED)}, default=str)


def _merge_tables(a: Any, b: Any) -> Any:
    """Two workers' versions of one table: dicts merge key by key, lists keep each item once.
    pytest-xdist sends whole files to one worker (``properties.plugin``), so a table built up by one
    file's tests arrives whole; only tables filled from several files meet here."""
    if isinstance(a, dict) and isinstance(b, dict):
        return {**a, **{k: _merge_tables(a[k], v) if k in a else v for k, v in b.items()}}
    if isinstance(a, list) and isinstance(b, list):
        return a + [x for x in b if x not in a]
    return b


def absorb(text: str) -> None:
    """Merge a worker's ``snapshot`` into this process's state."""
    data = json.loads(text)
    for key, v in data["worst"]:
        e = WORST.setdefault(tuple(key), _new_entry())
        e["n"] += v["n"]
        for hist in ("u_hist", "ratio_hist"):
            for k, n in v[hist].items():
                e[hist][k] = e[hist].get(k, 0) + n
        e["bound_u_min"], e["bound_u_max"] = min(e["bound_u_min"], v["bound_u_min"]), max(e["bound_u_max"], v["bound_u_max"])
        _fold(e, v["ratio"], v["worst_u"], v["bound_u"], v["worst_cases"])
    for key, n, test in data["examples"]:
        EXAMPLES[tuple(key)] += n
        _first_test(tuple(key), test)
    for name, value in data["tables"].items():
        TABLES[name] = _merge_tables(TABLES[name], value) if name in TABLES else value
    NOT_COVERED.update(data.get("not_covered", ()))


def worst_rows() -> list[dict[str, Any]]:
    rows = []
    for (r, p, d), v in sorted(WORST.items()):
        hist = dict(sorted(v["ratio_hist"].items(), key=lambda kv: _bin_order(kv[0])))
        rows.append({"record": r, "property": p, "dtype": d, "worst_u": v["worst_u"], "bound_u": v["bound_u"],
                     "ratio": v["ratio"], "n": v["n"], "ratio_p50": quantile(hist, 0.5),
                     "ratio_p90": quantile(hist, 0.9), "ratio_p99": quantile(hist, 0.99),
                     "bound_u_min": v["bound_u_min"], "bound_u_max": v["bound_u_max"], "ratio_hist": hist,
                     "u_hist": dict(sorted(v["u_hist"].items(), key=lambda kv: _bin_order(kv[0]))),
                     "worst_cases": v["worst_cases"]})
    return rows


# distributions whose versions identify a run (read from package metadata: importing torch or
# transformers only to ask would cost seconds)
DISTRIBUTIONS = ("logitcheck", "numpy", "scipy", "hypothesis", "pytest", "pytest-xdist", "ml_dtypes", "gguf",
                 "llama-cpp-python", "torch", "transformers", "cupy-cuda13x", "cupy-cuda12x")


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version()}
    for name in DISTRIBUTIONS:
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            if not name.startswith("cupy"):
                out[name] = "absent"
    return out


def device(backend: str) -> str:
    if backend == "emulated":
        return (f"CPU ({platform.machine()}, {os.cpu_count()} cores): gpu_impl's CUDA kernels emulated from their "
                "source, NumPy for the array code")
    if backend != "cupy":
        return f"CPU via NumPy ({platform.machine()}, {os.cpu_count()} cores)"
    reason = cupy_device_reason()
    if reason:
        return f"no CUDA device: {reason}"
    cp = cupy_or_none()
    name = cp.cuda.runtime.getDeviceProperties(cp.cuda.Device().id)["name"]
    return f"{name.decode() if isinstance(name, bytes) else name} (CUDA runtime {cp.cuda.runtime.runtimeGetVersion()})"


def reproduce_template(impl: str, backend: str, profile: str, seed: Any, derandomized: bool,
                       contract: str = "default", plugin: bool = False) -> str:
    """The pytest line that reruns one test (``{nodeid}`` to fill in) the way this run ran it:
    every option that changes what the test does, each argument quoted for a POSIX shell (an
    ``exec:`` command holds spaces); ``plugin``: the run loaded properties.plugin with ``-p``,
    so the rerun must too (``--impl`` is that plugin's option)."""
    cmd = "python -m pytest" + (" -p properties.plugin" if plugin else "") + " {nodeid} " + \
        shlex.join(rerun_options(impl, backend, profile, seed, derandomized, contract))
    return cmd


def rerun_options(impl: str, backend: str, profile: str, seed: Any, derandomized: bool,
                  contract: str = "default") -> list[str]:
    """The options of a rerun, defaults left out."""
    out = [f"--hypothesis-profile={profile}"]
    if seed is not None and not derandomized:
        out.append(f"--hypothesis-seed={seed}")
    if impl != "gpu_impl":
        out += ["--impl", anchored(impl)]
    if backend != "numpy":
        out += ["--backend", backend]
    if contract != "default":
        out += ["--contract", contract]
    return out


def anchored(impl: str) -> str:
    """``exec:./build/harness ...`` with the harness' relative path made absolute where it names
    an existing file, so that a rerun command works from any directory; anything else unchanged."""
    if not impl.startswith("exec:"):
        return impl
    try:
        argv = shlex.split(impl[len("exec:"):])
    except ValueError:
        return impl
    if not argv or os.path.isabs(argv[0]) or "/" not in argv[0] or not os.path.exists(argv[0]):
        return impl
    return "exec:" + shlex.join([os.path.abspath(argv[0]), *argv[1:]])


def _identity(config: Any) -> tuple[str, str, str, Any, bool]:
    """(impl, backend, hypothesis profile, seed, derandomized) as this run runs."""
    from hypothesis import settings

    return (config.getoption("--impl"), config.getoption("--backend"), settings.get_current_profile_name(),
            config.getoption("hypothesis_seed", None), bool(settings.default.derandomize))


def _contract(config: Any) -> str:
    return str(config.getoption("--contract", "default") or "default")


def _plugin_from_command_line(config: Any) -> bool:
    """Whether ``-p properties.plugin`` came on the command line (an ini file's addopts reload
    it by themselves wherever the rerun runs from the same directory)."""
    args = list(getattr(config.invocation_params, "args", ()) or ())
    return any(a == "properties.plugin" and i and args[i - 1] == "-p" for i, a in enumerate(args)) or \
        "-pproperties.plugin" in args


def package_nodeid(config: Any, nodeid: str) -> str | None:
    """``nodeid`` relative to the folder that holds the installed ``properties`` package
    (``properties/samplers/test_x.py::test[top_p]``), the same on every machine and install;
    None for a test outside the package."""
    import properties

    path, sep, rest = nodeid.partition("::")
    home = Path(properties.__file__).resolve().parent.parent
    try:
        rel = (Path(config.rootpath) / path).resolve().relative_to(home)
    except ValueError:
        return None
    return rel.as_posix() + sep + rest if rel.parts[:1] == ("properties",) else None


def rerun_command(config: Any, nodeid: str) -> str:
    """The command that reruns test ``nodeid`` the way this run ran it, from any directory: a
    test of the suite by ``logitcheck rerun`` (which finds the installed package), any other by
    the pytest line (run from this run's directory)."""
    ident = _identity(config)
    inside = package_nodeid(config, nodeid)
    if inside is not None:
        return shlex.join(["logitcheck", "rerun", inside, *rerun_options(*ident, _contract(config))])
    return reproduce_template(*ident, _contract(config), _plugin_from_command_line(config)) \
        .replace("{nodeid}", shlex.quote(nodeid))


def run_meta(config: Any, exitstatus: int) -> dict[str, Any]:
    """The run's identity, written by the pytest plugin (and so by ``logitcheck report``, which runs it)."""
    impl, backend, profile, seed, derandomized = _identity(config)
    workers = getattr(config.option, "numprocesses", None)  # absent without xdist, whatever name loaded it
    selection = " and ".join(f"{flag} {v}" for flag, v in (("-k", config.getoption("keyword")),
                                                          ("-m", config.getoption("markexpr"))) if v)
    from properties import numerics

    return {"impl": impl, "backend": backend, "device": device(backend), "profile": profile,
            "contract": numerics.contract().name,
            "derandomized": derandomized, "seed": None if derandomized else seed,
            "selection": selection, "workers": workers or 1,
            "date": _STARTED.isoformat(timespec="seconds"), "duration_s": round(time.monotonic() - _T0, 1),
            "pytest_exit": exitstatus, "versions": versions(), "not_covered": sorted(NOT_COVERED),
            "reproduce": reproduce_template(impl, backend, profile, seed, derandomized, _contract(config),
                                            _plugin_from_command_line(config))}


def dump(path: Path, outcomes: list[dict[str, Any]], meta: dict[str, Any]) -> None:
    for row in outcomes:
        if row.get("outcome") == "failed" and meta.get("reproduce"):
            row["reproduce"] = row.get("failure", {}).get("rerun") or \
                meta["reproduce"].replace("{nodeid}", shlex.quote(str(row.get("nodeid"))))
    data = {
        "schema_version": SCHEMA_VERSION,
        "meta": meta,
        "tests": sorted(outcomes, key=lambda t: str(t.get("nodeid"))),
        "worst_error": worst_rows(),
        "examples": [{"record": r, "property": p, "count": n, "test": FIRST_TEST.get((r, p), "")}
                     for (r, p), n in sorted(EXAMPLES.items())],
        "histogram_bins": {"per_decade": BINS_PER_DECADE, "lowest": BIN_LO, "highest": BIN_HI},
        "tables": TABLES,
    }
    path.write_text(json.dumps(data, indent=1, default=str))
