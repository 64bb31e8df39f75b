"""Batch invariance of the ops: a row's result may not depend on the batch it was computed in.

An engine batches whatever requests are in flight, so one prompt's tokens meet a different batch
at every step. A kernel that picks its reduction blocks (or its GEMM path, or its split-K) from
the number of rows is numerically correct and still gives a row different bits in a batch of 1
and a batch of 8: greedy decoding then depends on the server's load.

The property: draw a batch of N rows (N <= ``MAX_BATCH``; the values are NumPy fills from the
ops' own strategies), compute the op on the whole batch (the reference), on every row alone, in
consecutive sub-batches of one or two drawn sizes, and on a permutation of the rows; every row
must be bitwise equal (NaN payloads and signed zeros included) across all of them.

Whether that is demanded is the contract's (``numerics.Contract.batch_invariant_for``):
``--contract batch_invariant`` demands it of every op; an implementation's
"batch_invariant:<function>" claim demands it of that op under any contract. A demanded op that
varies fails with the op, the row, the two batch sizes and the first differing element (in u);
otherwise what was seen is returned, and the test records it (table "batch_invariance").
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
from hypothesis import reject, strategies as st

from properties.failure import Failure
from properties import numerics as nm
from properties.backends import PASS_THROUGH
from properties.ops.records import OP_RECORDS_BY_NAME, OpRecord
from properties.ops.strategies import OpCase

MAX_BATCH = 16
DTYPES = ("float32", "float16", "bfloat16")


@dataclass(frozen=True)
class BatchOp:
    """An op with a batch (token) leading axis: which of its inputs carry that axis."""
    name: str
    """The op record (``records.OP_RECORDS_BY_NAME``) whose strategy draws the rows."""
    batched: tuple[str, ...]
    """The case's arrays whose leading axis is the batch (the others are shared: weights, tables)."""
    key: str = "rows"
    """The shape entry that sets the batch size."""

    @property
    def record(self) -> OpRecord:
        return OP_RECORDS_BY_NAME[self.name]

    @property
    def fn(self) -> str:
        """The implementation function (what a "batch_invariant:<function>" claim names)."""
        return self.record.fn

    def __repr__(self) -> str:
        return self.name


BATCH_OPS: tuple[BatchOp, ...] = (
    BatchOp("softmax", ("x", "mask")),
    BatchOp("log_softmax", ("x", "mask")),
    BatchOp("rms_norm", ("x",)),
    BatchOp("layer_norm", ("x",)),
    BatchOp("gelu_tanh", ("x",)),
    BatchOp("gelu_erf", ("x",)),
    BatchOp("silu", ("x",)),
    BatchOp("swiglu", ("gate", "up")),
    BatchOp("geglu", ("gate", "up")),
    BatchOp("softcap", ("x",)),
    BatchOp("argmax", ("x",)),
    BatchOp("rope", ("x", "positions"), "tokens"),
    BatchOp("embedding", ("ids",), "tokens"),
    BatchOp("matmul", ("a",), "m"),
    BatchOp("project_qkv", ("x",), "tokens"),
    BatchOp("output_logits", ("hidden",), "tokens"),
)
BATCH_OPS_BY_NAME = {b.name: b for b in BATCH_OPS}


@dataclass(frozen=True)
class BatchExample:
    case: OpCase
    """The whole batch (``case.shape[key]`` rows)."""
    sizes: tuple[int, ...]
    """Sub-batch sizes besides 1 and the whole: the batch is cut into consecutive chunks of each."""
    perm_seed: int

    def __repr__(self) -> str:
        return f"BatchExample(case={self.case!r}, sizes={self.sizes!r}, perm_seed={self.perm_seed})"


@st.composite
def batch_examples(draw, bop: BatchOp, max_batch: int = MAX_BATCH) -> BatchExample:
    """A batch of 2..max_batch rows of ``bop``'s inputs (its record's strategy, the row axis last)."""
    dtype = draw(st.sampled_from([d for d in DTYPES if d in bop.record.dtypes]), label="dtype")
    base = draw(bop.record.cases(dtype), label="rows from")
    n = draw(st.integers(2, max_batch), label="batch")
    params = {k: v for k, v in base.params.items() if k != "axis"}  # the batch is the leading axis
    case = OpCase(base.op, dtype, base.family, base.seed, {**base.shape, bop.key: n}, params)
    sizes = draw(st.lists(st.integers(2, n - 1), min_size=1, max_size=2), label="sub-batch sizes") if n > 2 else []
    return BatchExample(case, tuple(sorted(set(sizes))), draw(st.integers(0, 2**16), label="perm seed"))


@dataclass
class Observation:
    """What one example showed: invariant, or the first row that differed and where."""
    op: str
    fn: str
    dtype: str
    invariant: bool
    difference: str = ""
    """The first difference, in words (op, row, the two batch sizes, the element, in u)."""


def _parts(out: Any) -> tuple[np.ndarray, ...]:
    return tuple(np.asarray(p) for p in out) if isinstance(out, tuple) else (np.asarray(out),)


def _bits(a: np.ndarray) -> np.ndarray:
    a = np.ascontiguousarray(a)
    return a.view(np.dtype(f"u{a.dtype.itemsize}")) if a.dtype.itemsize in (1, 2, 4, 8) else a


def _hex(a: Any, dtype: np.dtype) -> str:
    return f"0x{int(_bits(np.asarray(a, dtype=dtype).reshape(1))[0]):0{2 * dtype.itemsize}x}"


def _u_apart(a: Any, b: Any, dtype: np.dtype) -> str:
    """How far two differing elements are apart: relative, in u of the output dtype."""
    if dtype.kind != "f":
        return f"{a} vs {b}"
    x, y = float(a), float(b)
    shown = f"{x!r} vs {y!r} (bits {_hex(a, dtype)} vs {_hex(b, dtype)})"
    if not (np.isfinite(x) and np.isfinite(y)):
        return shown
    big = max(abs(x), abs(y))
    if big == 0:
        return shown + ", signed zeros"
    return shown + f", {abs(x - y) / (nm.unit_roundoff(dtype) * big):.3g} u apart"


def _first_difference(ref: tuple[np.ndarray, ...], got: tuple[np.ndarray, ...]) -> str | None:
    """Where one row's outputs first differ bitwise (None: equal)."""
    if len(ref) != len(got):
        return f"{len(got)} outputs where the whole batch gave {len(ref)}"
    for i, (r, g) in enumerate(zip(ref, got)):
        if r.shape != g.shape or r.dtype != g.dtype:
            return f"output {i} has shape {g.shape} {g.dtype}, the whole batch's row {r.shape} {r.dtype}"
        where = np.argwhere(_bits(r) != _bits(g))
        if where.size:
            idx = tuple(int(j) for j in where[0])
            return f"output {i} element {idx}: {_u_apart(r[idx], g[idx], r.dtype)}"
    return None


def _evaluations(ex: BatchExample, n: int) -> list[tuple[str, np.ndarray]]:
    """(what it is, the rows of the batch it computes, in order) for every batch but the whole."""
    out = [(f"row {b} alone", np.array([b])) for b in range(n)]
    for s in ex.sizes:
        out += [(f"rows {i}..{min(i + s, n) - 1}", np.arange(i, min(i + s, n))) for i in range(0, n, s)]
    perm = np.random.default_rng(ex.perm_seed).permutation(n)
    out.append((f"the batch permuted {perm.tolist()}", perm))
    return out


def _run(oimpl, bop: BatchOp, case: OpCase, rows: np.ndarray | None) -> tuple[np.ndarray, ...]:
    arrays = dict(case.arrays)
    if rows is not None:
        sl = slice(int(rows[0]), int(rows[-1]) + 1) if np.array_equal(rows, np.arange(rows[0], rows[-1] + 1)) else rows
        arrays.update({k: arrays[k][sl] for k in bop.batched if k in arrays})
    return _parts(oimpl(bop.fn, **arrays, **case.params))


def _short(parts: tuple[np.ndarray, ...], n: int) -> str | None:
    """Why outputs do not have one row per input row (None: they do)."""
    for i, p in enumerate(parts):
        if p.ndim == 0 or p.shape[0] != n:
            return f"gave output {i} of shape {p.shape}, not {n} rows"
    return None


def observe_batch_invariance(oimpl, bop: BatchOp, ex: BatchExample) -> Observation:
    """Compute every batch of the example; the first row that differs from the whole batch's."""
    case = ex.case
    n = int(case.shape[bop.key])
    try:
        whole = _run(oimpl, bop, case, None)
    except ValueError:  # a refused batch has no rows to compare (the oracle property judges refusals)
        reject()
    short = _short(whole, n)
    if short:
        return Observation(bop.name, bop.fn, case.dtype, False, f"{bop.name}: the whole batch of {n} rows {short}")
    for what, rows in _evaluations(ex, n):
        try:
            got = _run(oimpl, bop, case, rows)
        except PASS_THROUGH:
            raise
        except Exception as exc:
            row = int(rows[0])
            return Observation(bop.name, bop.fn, case.dtype, False,
                               f"{bop.name}: row {row} is answered in the whole batch of {n} but {what} (a batch of "
                               f"{rows.size}) raised {type(exc).__name__}: {exc}")
        short = _short(got, rows.size)
        if short:
            return Observation(bop.name, bop.fn, case.dtype, False, f"{bop.name}: {what} (a batch of {rows.size}) {short}")
        for pos, row in enumerate(rows):
            diff = _first_difference(tuple(p[row] for p in whole), tuple(p[pos] for p in got))
            if diff:
                return Observation(bop.name, bop.fn, case.dtype, False,
                                   f"{bop.name}: row {int(row)} differs between a batch of {n} (the whole batch) and a "
                                   f"batch of {rows.size} ({what}, its row {pos}): {diff}")
    return Observation(bop.name, bop.fn, case.dtype, True)


def judge(oimpl, bop: BatchOp, ex: BatchExample, seen: Observation) -> None:
    """Fail where the contract (or the implementation's own claim) demands batch invariance of
    the op and the example showed a difference."""
    c = nm.contract(oimpl)
    if seen.invariant or not c.batch_invariant_for(bop.fn):
        return
    why = ("the batch_invariant contract demands it" if c.batch_invariant else
           f"the implementation claims {nm.BATCH_CLAIM}:{bop.fn}")
    raise Failure(f"{seen.difference}; {why}", property="batch invariance", record=bop.name, case=ex)


def check_batch_invariance(oimpl, bop: BatchOp, ex: BatchExample) -> Observation:
    """``observe_batch_invariance``, then ``judge``: the property's body."""
    seen = observe_batch_invariance(oimpl, bop, ex)
    judge(oimpl, bop, ex, seen)
    return seen


_SEEN: dict[str, dict[str, Any]] = {}


def record(oimpl, seen: Observation) -> list[dict[str, Any]]:
    """Add one example's observation to the run's "batch_invariance" rows (one per op): whether
    the implementation claims it, whether the run demanded it, what was observed."""
    claimed = nm.DEFAULT.with_claims(nm.claims(oimpl)).batch_invariant_for(seen.fn)
    row = _SEEN.setdefault(seen.op, {"op": seen.op, "function": seen.fn, "claimed": claimed,
                                     "demanded": nm.contract(oimpl).batch_invariant_for(seen.fn),
                                     "observed": "invariant", "examples": 0, "varied": 0, "dtypes_varied": [],
                                     "first_difference": ""})
    row["examples"] += 1
    if not seen.invariant:
        row["varied"] += 1
        row["observed"] = "varies with the batch"
        if seen.dtype not in row["dtypes_varied"]:
            row["dtypes_varied"] = sorted([*row["dtypes_varied"], seen.dtype])
        row["first_difference"] = row["first_difference"] or f"[{seen.dtype}] {seen.difference}"[:400]
    return [dict(r) for _, r in sorted(_SEEN.items())]
