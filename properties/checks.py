"""Property bodies, written once and shared by the pytest tests and the bug-zoo runner.

Each ``check_*`` takes an ``Impl``, a catalogue record and a drawn ``Case``; it raises
``PropertyFailure`` (an AssertionError) with a WHY / CASE message, and returns the error
reports it measured so the caller can record them.
"""
from __future__ import annotations

import numpy as np

from properties.catalogue.record import SamplerRecord
from properties.errors import ErrorReport, describe_set_violation, elementwise_error, softmax_error
from properties.strategies import Case


class PropertyFailure(AssertionError):
    pass


def fail(prop: str, record: str, case: Case, why: str, row: int | None = None) -> None:
    where = f" row {row}" if row is not None else ""
    raise PropertyFailure(f"WHY  {prop}[{record}]{where}: {why}\nCASE {case!r}")


def run_impl(impl, record: SamplerRecord, case: Case):
    out = record.impl(impl, case.logits, case.params)
    if record.kind == "select":
        ids = np.asarray(out[0] if isinstance(out, tuple) else out)
        if ids.shape != (case.batch,):
            fail("shape", record.name, case, f"selection returned shape {ids.shape}, expected ({case.batch},)")
        if ((ids < 0) | (ids >= case.vocab)).any():
            fail("range", record.name, case, f"token ids {ids.tolist()} outside [0, {case.vocab})")
        return out
    out = np.asarray(out)
    if out.shape != case.logits.shape:
        fail("shape", record.name, case, f"returned shape {out.shape}, expected {case.logits.shape} (fixed shape)")
    return out


def kept_mask(masked_row: np.ndarray) -> np.ndarray:
    return np.isfinite(masked_row)


def check_matches_oracle(impl, record: SamplerRecord, case: Case) -> list[ErrorReport]:
    """impl ≡ oracle: survivor set inside the may/must bracket, renormalised probabilities and
    transformed logits within the error model, selected token legal."""
    out = run_impl(impl, record, case)
    reports = []
    for b in range(case.batch):
        row, params = case.row64(b), case.row_params(b)
        if record.kind == "filter":
            kept = kept_mask(out[b])
            must, may = record.must_may(row, params)
            why = describe_set_violation(kept, must, may)
            if why:
                fail("impl≡oracle survivors", record.name, case, why, b)
            if kept.any():
                probs = np.asarray(impl("softmax", out[b:b + 1]))[0]
                rep = softmax_error(probs, np.where(kept, row, -np.inf))
                if not rep.ok:
                    fail("impl≡oracle probabilities", record.name, case, rep.describe(), b)
                reports.append(rep)
        elif record.kind == "transform":
            exact = record.run_oracle(row, params).dense_logits(case.vocab)
            rep = elementwise_error(out[b], exact, record.transform_bound_u(row, params))
            if not rep.ok:
                fail("impl≡oracle logits", record.name, case, rep.describe(), b)
            reports.append(rep)
        else:
            ids = np.asarray(out[0] if isinstance(out, tuple) else out)
            legal = record.legal_tokens(row, params)
            if not legal[ids[b]]:
                expected = np.flatnonzero(legal)[:6].tolist()
                fail("impl≡oracle selection", record.name, case, f"selected {ids[b]}, legal tokens {expected}", b)
    return reports


def survivors(impl, record: SamplerRecord, case: Case, params: dict | None = None) -> np.ndarray:
    """The impl's kept mask [B, V] for ``case`` (optionally with other parameters)."""
    c = case if params is None else Case(case.family, case.vocab, case.dtype, case.seeds, params, case.logits)
    return kept_mask(run_impl(impl, record, c))


def oracle_survivors(record: SamplerRecord, case: Case, params: dict | None = None) -> np.ndarray:
    ps = params if params is not None else case.params
    c = Case(case.family, case.vocab, case.dtype, case.seeds, ps, case.logits)
    return np.stack([record.oracle_kept(c.row64(b), c.row_params(b)) for b in range(c.batch)])
