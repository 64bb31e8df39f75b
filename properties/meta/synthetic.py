"""Synthetic results.json (schema version 2) for the report's meta tests: a run of any size with
chosen failures, built from a seed so every test sees the same page."""
from __future__ import annotations

from typing import Any

import numpy as np

from properties.recording import bin_key, quantile

FILES = ("test_impl_vs_oracle", "test_invariants", "test_ops", "test_quants", "test_engines",
         "test_peer_llama_cpp", "test_zoo", "test_meta_stats")
DTYPES = ("float32", "float16", "bfloat16")


def worst_row(rng: np.random.Generator, record: str, prop: str, dtype: str, test: str, n: int,
              scale: float = 0.01) -> dict[str, Any]:
    """n examples whose error / bound is log-normal around ``scale``, with a few exact zeros."""
    ratios = np.where(rng.random(n) < 0.1, 0.0, scale * np.exp(rng.normal(0, 1, n)))
    bounds = rng.uniform(4, 40, n)
    ratio_hist: dict[str, int] = {}
    u_hist: dict[str, int] = {}
    for r, b in zip(ratios, bounds):
        ratio_hist[bin_key(r)] = ratio_hist.get(bin_key(r), 0) + 1
        u_hist[bin_key(r * b)] = u_hist.get(bin_key(r * b), 0) + 1
    order = np.argsort(-ratios)[:3]
    cases = [{"ratio": float(ratios[i]), "worst_u": float(ratios[i] * bounds[i]), "bound_u": float(bounds[i]),
              "test": test, "case": f"Case(family='zipf', vocab={int(1000 + i)}, dtype={dtype!r}, seeds=({i},))"}
             for i in order]
    i = int(order[0])
    return {"record": record, "property": prop, "dtype": dtype, "worst_u": float(ratios[i] * bounds[i]),
            "bound_u": float(bounds[i]), "ratio": float(ratios[i]), "n": n, "ratio_hist": ratio_hist,
            "u_hist": u_hist, "ratio_p50": quantile(ratio_hist, 0.5), "ratio_p90": quantile(ratio_hist, 0.9),
            "ratio_p99": quantile(ratio_hist, 0.99), "bound_u_min": float(bounds.min()),
            "bound_u_max": float(bounds.max()), "worst_cases": cases}


def failed_test(nodeid: str, record: str, worst_u: float, bound_u: float) -> dict[str, Any]:
    case = f"Case(family='flat', vocab=32000, dtype='float16', seeds=(7,), params={{'p': [0.9]}})"
    why = f"worst error {worst_u:.3g} u at index 12 (model allows {bound_u:.3g} u)"
    rerun = f"python -m pytest '{nodeid}' --hypothesis-profile=nightly --hypothesis-seed=3"
    return {"nodeid": nodeid, "outcome": "failed", "duration": 3.2,
            "reason": f"{nodeid.split('::')[0]}:17: Failure: WHY  impl≡oracle probabilities[{record}] "
                      f"row 0: {why}\n\nTraceback ...\nCASE {case}",
            "failure": {"property": f"impl≡oracle probabilities[{record}] row 0", "record": record,
                        "dtype": "float16", "why": why, "case": case, "category": "error bound",
                        "error_u": worst_u, "bound_u": bound_u, "ratio": worst_u / bound_u, "rerun": rerun},
            "reproduce": rerun}


def results(n_tests: int = 60, n_records: int = 12, examples: int = 400, seed: int = 0,
            failures: tuple[str, ...] = ()) -> dict[str, Any]:
    """A nightly-like run: ``n_tests`` tests over the areas' files, ``n_records`` sampler records
    measured in three dtypes, and the named records failing their impl ≡ oracle test."""
    rng = np.random.default_rng(seed)
    records = [f"rec{i:03d}" for i in range(n_records)]
    tests, worst = [], []
    for i in range(n_tests):
        rec = records[i % n_records]
        node = f"properties/{FILES[i % len(FILES)]}.py::test_case[{rec}-{DTYPES[i % 3]}-{i}]"
        tests.append({"nodeid": node, "outcome": "skipped" if i % 17 == 5 else "passed",
                      "duration": round(float(rng.uniform(0, 4)), 3),
                      "reason": "NOT COVERED: gpu_impl.mirostat" if i % 17 == 5 else ""})
    for j, rec in enumerate(records):  # every fourth record an op, with the long property names ops have
        test = f"properties/test_impl_vs_oracle.py::test_impl_matches_oracle[{rec}-float32]" if j % 4 else \
            f"properties/test_ops.py::test_op_properties[{rec}-fused_rms_norm_rope_attention_block]"
        prop = "impl_vs_oracle" if j % 4 else f"impl_vs_oracle[{rec}_fused_rms_norm_rope_attention_block_output]"
        for dtype in DTYPES:
            worst.append(worst_row(rng, rec, prop, dtype, test, examples))
    for rec in failures:  # its own generator: the rest of the run is the same with or without failures
        node = f"properties/test_impl_vs_oracle.py::test_impl_matches_oracle[{rec}-float16]"
        tests.append(failed_test(node, rec, 51.2, 20.0))
        worst = [w for w in worst if (w["record"], w["dtype"]) != (rec, "float16")]
        worst.append(worst_row(np.random.default_rng([seed, *map(ord, rec)]), rec, "impl_vs_oracle", "float16", node,
                               examples, scale=2.0))
    zoo = [{"mutant": f"mutant_{i}", "description": "breaks it", "killed": i % 9 != 4,
            "examples_to_kill": int(rng.integers(1, 50)), "killed_by": "impl_vs_oracle"} for i in range(40)]
    return {
        "schema_version": 2,
        "meta": {"impl": "gpu_impl", "backend": "numpy", "device": "CPU via NumPy (x86_64, 2 cores)",
                 "profile": "nightly", "derandomized": False, "seed": 3, "selection": "", "workers": 2,
                 "date": "2026-01-02T02:17:00+00:00", "duration_s": 2900.0, "pytest_exit": 1 if failures else 0,
                 "versions": {"python": "3.11.7", "numpy": "2.4.6", "hypothesis": "6.155.2"},
                 "not_covered": ["gpu_impl.mirostat"],
                 "reproduce": "python -m pytest {nodeid} --hypothesis-profile=nightly --hypothesis-seed=3"},
        "tests": sorted(tests, key=lambda t: t["nodeid"]),
        "worst_error": worst,
        "examples": [{"record": r, "property": "impl_vs_oracle", "count": 3 * examples,
                      "test": f"properties/test_impl_vs_oracle.py::test_impl_matches_oracle[{r}-float32]"}
                     for r in records] + [{"record": "greedy", "property": "argmax_exact", "count": examples,
                                           "test": "properties/test_invariants.py::test_greedy"}],
        "histogram_bins": {"per_decade": 4, "lowest": -24, "highest": 36},
        "tables": {"zoo": zoo, "stats_gate": {"alpha": 1e-6, "false_failures": 0},
                   "llama_cpp_findings": [{"sampler": "typical", "finding": "entropy NaN", "witness": [0.0, 1.0]}],
                   "order_matrix": {"samplers": ["top_k", "top_p"], "cells": [
                       {"first": "top_k", "second": "top_p", "relation": "commute", "tvd": 0.0}]}},
    }

