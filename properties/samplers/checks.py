"""Property bodies, written once and shared by the pytest tests and the bug-zoo runner.

Each ``check_*`` takes an ``Impl``, a catalogue record and a drawn ``Case``; it raises a
``properties.failure.Failure`` (an AssertionError whose fields are the property, record, case
and, when measured, the error in u against its bound), and returns the error reports it
measured so the caller can record them.
"""
from __future__ import annotations

import numpy as np

from oracle.candidates import TokenDataArray
from oracle.samplers.base import Empty
from properties import cdf_shape, recording
from properties.failure import Failure
from properties.backends import PASS_THROUGH
from properties.samplers.record import SamplerRecord
from properties import numerics as nm
from properties.measure import ErrorReport, check_softmax, elementwise_error
from properties import ties
from properties.samplers.brackets import describe_set_violation
from properties.samplers.strategies import Case
from properties.stratified import GridResult, judge_logit_sampler
from properties.ties import prob_classes, underflowed

CHUNK_ELEMENTS = 1_000_000  # logits elements per impl call (N rows x V would not fit at large V)
KEPT_AS_GIVEN = "kept logits as given"
"""A filter record's tag: its survivors' logits come back unchanged, judged exactly here rather
than through the implementation's ``softmax`` (so the record's test uses its own function only)."""


def fail(prop: str, record: str, case: Case, why: str, row: int | None = None, report: ErrorReport | None = None,
         category: str = "") -> None:
    raise Failure(why, property=prop, record=record, case=case, row=row, report=report, category=category)


def run_impl(impl, record: SamplerRecord, case: Case):
    out = record.impl(impl, case.logits, case.params)
    if record.kind == "select":
        ids = np.asarray(out[0] if isinstance(out, tuple) else out)
        if ids.shape != (case.batch,):
            fail("shape", record.name, case, f"selection returned shape {ids.shape}, expected ({case.batch},)",
                 category="contract")
        if ((ids < 0) | (ids >= case.vocab)).any():
            fail("range", record.name, case, f"token ids {ids.tolist()} outside [0, {case.vocab})", category="contract")
        return out
    out = np.asarray(out)
    if out.shape != case.logits.shape:
        fail("shape", record.name, case, f"returned shape {out.shape}, expected {case.logits.shape} (fixed shape)",
             category="contract")
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
            why = describe_set_violation(kept, must, may, None if record.ties is None else record.ties(row))
            if why:
                fail("impl≡oracle survivors", record.name, case, why, b)
            why = count_violation(record, row, params, kept, must, may)
            if why:
                fail("impl≡oracle survivor count", record.name, case, why, b)
            if kept.any() and KEPT_AS_GIVEN in record.tags:
                given = case.logits[b].astype(np.float32)
                moved = np.flatnonzero(kept & (out[b] != given))
                if moved.size:
                    fail("impl≡oracle kept logits", record.name, case,
                         f"{moved.size} kept token(s) changed value, e.g. id {moved[0]}: {out[b][moved[0]]!r}, "
                         f"given {given[moved[0]]!r} (a filter hands its survivors back as given)", b)
            elif kept.any():
                probs = np.asarray(impl("softmax", out[b:b + 1]))[0]
                rep, why = judge_softmax(probs, np.where(kept, row, -np.inf))
                if why:
                    fail("impl≡oracle probabilities", record.name, case, why, b, rep)
                reports.append(rep)
        elif record.kind == "transform":
            exact = record.run_oracle(row, params).dense_logits(case.vocab)
            rep = elementwise_error(out[b], exact, record.transform_bound_u(row, params))
            if not rep.ok:
                fail("impl≡oracle logits", record.name, case, rep.describe(), b, rep)
            reports.append(rep)
        else:
            ids = np.asarray(out[0] if isinstance(out, tuple) else out)
            legal = record.legal_tokens(row, params)
            token = int(ids[b])
            if not legal[token] and record.ties is not None:  # an unstable rule: any token tied with a legal one
                token = tied_stand_in(token, legal, record.ties(row))
            if not legal[token]:
                expected = np.flatnonzero(legal)[:6].tolist()
                fail("impl≡oracle selection", record.name, case, f"selected {ids[b]}, legal tokens {expected}", b)
            if record.judge_state is not None:  # a stateful selector: its updated state too
                state = tuple(np.asarray(o)[b] for o in out[1:]) if isinstance(out, tuple) else ()
                why, rep = record.judge_state(record, row, params, token, state)
                if why:
                    fail("impl≡oracle state", record.name, case, why, b, rep)
                if rep is not None:
                    reports.append(rep)
    return reports


def tied_stand_in(token: int, legal: np.ndarray, classes: np.ndarray) -> int:
    """A legal token tied with ``token`` (``properties.ties``), which the state judge reads in its
    place (tied tokens have one probability), or ``token`` itself if none is."""
    if classes[token] < 0:
        return token
    twins = np.flatnonzero(legal & (classes == classes[token]))
    return int(twins[0]) if twins.size else token


def judge_softmax(probs: np.ndarray, row64: np.ndarray) -> tuple[ErrorReport, str | None]:
    """``measure.check_softmax`` under the active contract; a failure only the strict contract
    sees says so."""
    c = nm.contract()
    rep, why = check_softmax(probs, row64, c)
    if why and c is not nm.DEFAULT and check_softmax(probs, row64, nm.DEFAULT)[1] is None:
        why += nm.strict_only(False, True, c)
    return rep, why


def count_violation(record: SamplerRecord, row: np.ndarray, params: dict, kept: np.ndarray,
                    must: np.ndarray, may: np.ndarray) -> str | None:
    """For records tagged "count": the tie expansion of the bracket lets equal logits swap, so
    the survivor *count* is checked on its own against the oracle's counts at the variants.
    Applies where every undecided token (may, not must) holds one logit value, or the record's
    near-tie width is 0: then which of them survive cannot change how many do."""
    if "count" not in record.tags or np.array_equal(must, may):
        return None
    eps = record.key(row, params)[1] if record.key else 0.0
    if eps > 0 and np.unique(row[may & ~must]).size > 1:
        return None
    counts = [int(record.oracle_kept(row, v).sum()) for v in record.variants(params, row)]
    n = int(kept.sum())
    if min(counts) <= n <= max(counts):
        return None
    return (f"kept {n} tokens, the oracle keeps {min(counts)}..{max(counts)} (ties choose which "
            f"tokens survive, not how many)")


def survivors(impl, record: SamplerRecord, case: Case, params: dict | None = None) -> np.ndarray:
    """The impl's kept mask [B, V] for ``case`` (optionally with other parameters)."""
    c = case if params is None else Case(case.family, case.vocab, case.dtype, case.seeds, params, case.logits)
    return kept_mask(run_impl(impl, record, c))


def oracle_survivors(record: SamplerRecord, case: Case, params: dict | None = None) -> np.ndarray:
    ps = params if params is not None else case.params
    c = Case(case.family, case.vocab, case.dtype, case.seeds, ps, case.logits)
    return np.stack([record.oracle_kept(c.row64(b), c.row_params(b)) for b in range(c.batch)])


# --- invariants (bodies of samplers/test_invariants.py) -------------------------------------

def check_softmax_invariants(impl, case: Case, shift: int) -> None:
    """softmax is >= 0, exactly 0 at -inf, its ratios and row sum within the numerics model
    (``measure.check_softmax``: order-free ratios, the contract's normaliser), and it is bitwise
    invariant under a shift that is exact in fp32 (logits snapped to a 2^-8 grid within ±512)."""
    grid = np.where(np.isfinite(case.logits.astype(np.float64)),
                    np.clip(np.round(case.logits.astype(np.float64) * 256) / 256, -512, 512), -np.inf)
    x = grid.astype(np.float32)
    p = np.asarray(impl("softmax", x))
    p_shift = np.asarray(impl("softmax", (grid + shift).astype(np.float32)))
    if not (p >= 0).all():
        fail("softmax invariants", "softmax", case, "negative probability")
    if not (p[~np.isfinite(x)] == 0).all():
        fail("softmax invariants", "softmax", case, "a -inf logit got non-zero probability")
    for b in range(case.batch):
        rep, why = judge_softmax(p[b], grid[b])
        if why:
            fail("softmax invariants", "softmax", case, why, b, rep)
    if not np.array_equal(p, p_shift):
        fail("softmax invariants", "softmax", case, f"not invariant under an exact shift of the logits by {shift}")


def check_noop(impl, record: SamplerRecord, case: Case, noop: dict) -> None:
    """No-op parameters leave the float32 logits bit-identical, and the oracle sampler is Empty."""
    params = {k: (np.stack([v] * case.batch) if isinstance(v, np.ndarray) else np.full(case.batch, v))
              for k, v in noop.items()}
    out = run_impl(impl, record, Case(case.family, case.vocab, case.dtype, case.seeds, params, case.logits))
    given = case.logits.astype(np.float32)
    same = (out == given) | (np.isnan(out) & np.isnan(given))
    if record.ties is prob_classes:  # a stage deciding on probabilities cannot tell a token whose float32
        # probability is 0 from a masked one: dropping it is still a no-op (TopPLogitsWarper(1.0) does)
        same |= np.stack([underflowed(case.row64(b)) for b in range(case.batch)]) & np.isneginf(out)
    if not same.all():
        b, i = (int(a[0]) for a in np.nonzero(~same))
        fail("noop", record.name, case, f"{record.name}{noop} changed the logits (row {b}, id {i}: "
                                        f"{out[b, i]!r}, given {given[b, i]!r})", b)
    if not isinstance(record.oracle({**noop, "n_vocab": case.vocab}), Empty):
        fail("noop", record.name, case, f"oracle {record.name}{noop} is not empty")


def check_monotone(impl, record: SamplerRecord, case: Case, other: np.ndarray) -> None:
    """Survivor sets are nested as the record's monotone parameter moves (oracle and impl)."""
    param, direction, active_from = record.monotone[0]
    mine = np.maximum(case.params[param], active_from)
    other = np.maximum(other, active_from)
    lo, hi = np.minimum(mine, other), np.maximum(mine, other)
    small, large = (lo, hi) if direction > 0 else (hi, lo)
    classes = [None if record.ties is None else record.ties(case.row64(r)) for r in range(case.batch)]
    for name, kept in (("oracle", lambda p: oracle_survivors(record, case, {**case.params, param: p})),
                       ("impl", lambda p: survivors(impl, record, case, {**case.params, param: p}))):
        a, b = kept(small), kept(large)
        # nested modulo ties: which tied tokens a call keeps is free, so per tie class the smaller
        # set keeps at most as many as the larger one (any tied subset is a legal top-k set)
        bad = np.array([r for r in range(case.batch) if not nested(a[r], b[r], classes[r])], dtype=np.int64)
        if bad.size:
            fail("monotone", record.name, case,
                 f"{name}: survivors at {param}={small[bad]} not within those at {large[bad]}"
                 + ("" if record.ties is None else " (modulo ties: more of a tie class kept)"), int(bad[0]))


def nested(small: np.ndarray, large: np.ndarray, classes: np.ndarray | None) -> bool:
    """small ⊆ large, or with tie classes: some relabelling inside the classes makes it so
    (per class, small keeps at most as many as large)."""
    if classes is None:
        return not (small & ~large).any()
    return bool((ties.counts(small, classes) <= ties.counts(large, classes)).all()
                and not (small & ~large & (classes < 0)).any())


def check_min_keep(impl, record: SamplerRecord, case: Case) -> None:
    """At least max(1, min(min_keep, finite)) tokens survive (oracle and impl)."""
    n_finite = np.isfinite(case.logits).sum(axis=1)
    want = np.minimum(case.params["min_keep"], n_finite) if record.min_keep else np.zeros(case.batch, int)
    want = np.maximum(want, 1)
    for name, kept in (("oracle", oracle_survivors(record, case)), ("impl", survivors(impl, record, case))):
        got = kept.sum(axis=1)
        if not (got >= want).all():
            fail("min_keep", record.name, case, f"{name}: {got} survivors, at least {want} required")


# --- row contract: rows are independent, bad rows are refused ------------------------------------

def _row_case(case: Case, b: int) -> Case:
    params = {k: (v[b:b + 1] if isinstance(v, np.ndarray) and v.ndim >= 1 else v) for k, v in case.params.items()}
    return Case(case.family, case.vocab, case.dtype, case.seeds[b:b + 1], params, case.logits[b:b + 1])


def _as_tuple(out) -> tuple:
    return tuple(np.asarray(o) for o in out) if isinstance(out, tuple) else (np.asarray(out),)


def check_batch_invariance(impl, record: SamplerRecord, case: Case) -> None:
    """Row b of a batched call is bit-identical to the call on row b alone (with row b's
    parameters): a row's result may not depend on which other rows share its batch."""
    batched = _as_tuple(run_impl(impl, record, case))
    for b in range(case.batch):
        alone = _as_tuple(run_impl(impl, record, _row_case(case, b)))
        for i, (x, y) in enumerate(zip(batched, alone)):
            if not np.array_equal(x[b], y[0], equal_nan=np.issubdtype(y.dtype, np.floating)):
                diff = np.flatnonzero(np.asarray(x[b] != y[0]).ravel())[:6].tolist()
                fail("batch invariance", record.name, case,
                     f"output {i} of row {b} in a batch of {case.batch} differs from the row alone at {diff}", b)


BAD_ROWS = ("nan", "posinf", "all_neginf")


def check_rejects_bad_row(impl, record: SamplerRecord, case: Case, row: int, col: int, bad: str) -> None:
    """A NaN or +inf logit (and, for a selector, a row with no finite logit). Any contract: no
    out-of-range token id (it would index past the vocabulary). A contract that refuses bad
    input (strict, or the implementation's own claim): a ValueError, never a computed result.
    Otherwise whether it refused is graded (``recording.robustness``), not failed."""
    x = case.logits.astype(np.float32)
    try:  # a refusal means something only from an implementation that answers the clean rows
        record.impl(impl, x.copy(), case.params)
    except PASS_THROUGH:
        raise
    except Exception as exc:
        fail("clean row answered", record.name, case, f"raised {type(exc).__name__}: {exc} on the clean rows, "
             f"before any bad value was planted", category="crash")
    if bad == "all_neginf":
        x[row] = -np.inf
        if record.kind != "select":  # legal input for filters and transforms: -inf in, -inf out
            out = np.asarray(record.impl(impl, x, case.params), dtype=np.float32)
            if np.isfinite(out[row]).any() or np.isnan(out[row]).any():
                fail("all -inf row stays -inf", record.name, Case(case.family, case.vocab, "float32", case.seeds,
                     case.params, x), f"row {row} is all -inf; the output holds {out[row][~np.isneginf(out[row])][:4]}",
                     row, category="contract")
            return
    else:
        x[row, col] = np.nan if bad == "nan" else np.inf
    poisoned = Case(case.family, case.vocab, "float32", case.seeds, case.params, x)
    c = nm.contract(impl)
    try:
        out = record.impl(impl, poisoned.logits, poisoned.params)
    except ValueError:
        recording.robustness("bad input", record.name, True, "")
        return
    except PASS_THROUGH:  # not implemented, or a harness fault: not a refusal
        raise
    except Exception as exc:  # a crash is a refusal only in the loosest sense
        if c.refuses_bad_input:
            fail("bad row refused", record.name, poisoned, f"row {row} holds {bad}: raised {type(exc).__name__}: "
                 f"{exc} instead of ValueError", row, category="contract")
        recording.robustness("bad input", record.name, False, f"{bad}: raised {type(exc).__name__}")
        return
    shown = np.asarray(out[0] if isinstance(out, tuple) else out)
    if record.kind == "select" and ((shown < 0) | (shown >= case.vocab)).any():
        fail("bad row: token id in range", record.name, poisoned,
             f"row {row} holds {bad} (column {col}); returned ids {shown.tolist()} outside [0, {case.vocab})", row,
             category="contract")
    what = f"ids {shown.tolist()}" if record.kind == "select" else f"an array of shape {shown.shape}"
    why = f"row {row} holds {bad} (column {col}); returned {what} instead of raising ValueError"
    if c.refuses_bad_input:
        fail("bad row refused", record.name, poisoned, why, row, category="contract")
    recording.robustness("bad input", record.name, False, why)


# --- distribution: dist on the stratified grid of uniforms --------------------------------------

DRAWN_GRID_N = 2**12  # per drawn example (V <= 500): a token off by > ~2.5e-4 fails; fixed rows use 2^16


def sample_impl(impl, row: np.ndarray, u: np.ndarray) -> np.ndarray:
    """``impl.dist`` over copies of ``row``, one per uniform in ``u`` (in chunks of CHUNK_ELEMENTS)."""
    rows = max(1, CHUNK_ELEMENTS // row.size)
    out = []
    for start in range(0, u.size, rows):
        uc = u[start:start + rows]
        ids = np.asarray(impl("dist", np.repeat(row[None, :], uc.size, axis=0), uc))
        if ids.shape != uc.shape or not np.issubdtype(ids.dtype, np.integer):
            raise Failure(f"dist returned {ids.dtype} shape {ids.shape}, expected integer ids of shape {uc.shape}",
                          category="contract")
        out.append(ids)
    return np.concatenate(out)


def dist_on_grid(impl, row: np.ndarray, n: int) -> GridResult:
    """dist on ``row`` (as the implementation receives it) driven by the n stratified uniforms of
    properties/stratified.py, judged against its float64 softmax under the default (blocked)
    contract: each token drawn n·p ± (1 + 2nκ) times. Exact: no statistics."""
    return judge_logit_sampler(lambda u: sample_impl(impl, row, u), row.astype(np.float64), n=n)


def check_dist_one_cdf(impl, case: Case) -> list[ErrorReport]:
    """dist on row 0 of a large row at ``cdf_shape.uniforms`` (a grid, the CDF's top, the points
    past the most probable tokens): one normaliser must explain every draw (``cdf_shape``)."""
    row = case.logits[0]
    row64 = row.astype(np.float64)
    u = cdf_shape.uniforms(row64)
    try:
        ids = sample_impl(impl, row, u)
    except Failure as exc:
        fail("dist follows one CDF", "dist", case, exc.why, category=exc.category)
    res = cdf_shape.judge(row64, u, ids)
    if not res.passed:
        fail("dist follows one CDF", "dist", case, res.describe(), category="distribution")
    return [ErrorReport(res.ratio, 1.0, 0)]


def check_dist_grid(impl, case: Case, n: int = DRAWN_GRID_N) -> None:
    """dist on row 0 of the case, on the stratified grid (``dist_on_grid``)."""
    try:
        res = dist_on_grid(impl, case.logits[0], n)
    except ValueError as exc:  # ids outside the vocabulary
        fail("dist on the stratified grid", "dist", case, str(exc), category="contract")
    if not res.passed:
        fail("dist on the stratified grid", "dist", case, res.describe(), category="distribution")
