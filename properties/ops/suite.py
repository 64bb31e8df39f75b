"""The named op properties: (how to draw an example for a dtype, the check to run on it).

``test_ops.py`` and ``test_attention.py`` are generated from ``PROPERTIES`` (through
``property_params`` and ``run_property``); the bug zoo (properties/zoo/ops.py) runs the same
entries against mutants, so a property is written exactly once.
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np
import pytest
from hypothesis import strategies as st

from properties import recording
from properties.backends import Impl
from properties.ops import attention_checks as ac, checks as oc
from properties.ops.fill import fill
from properties.ops.records import OP_RECORDS, OP_RECORDS_BY_NAME as OPS
from properties.ops.strategies import attention_cases, norm_cases, rope_cases, row_cases, step_cases
from properties.plugin import covered
from properties.property import Property
from properties.samplers.strategies import FAMILIES

LOGIT_FAMS = tuple(FAMILIES)

ALL_DTYPES = ("float32", "float16", "bfloat16")


def op_property(name: str, op: str, draw: Callable[[str], st.SearchStrategy[Any]], body: Callable[[Any, Any], Any],
                group: str = "ops", dtypes: tuple[str, ...] = ALL_DTYPES, calls: tuple[str, ...] = ()) -> Property:
    """An op property judged at each of ``dtypes``: ``draw(dtype)``, and ``body(ops impl, example)``
    returning (ErrorReport, err_u) to record, or None. Recorded under ``op``; ``calls``: the impl
    functions the body calls, where they are not just ``op``."""
    return Property(name, lambda dtype, **scope: draw(dtype), lambda impl, dtype, example: body(impl, example),
                    frozenset(calls or (op,)), points=lambda: dtypes, subject=op, group=group)


def _oracle_prop(record) -> Property:
    return op_property(f"impl_vs_oracle[{record.name}]", record.name, record.cases,
                       lambda impl, case, r=record: oc.check_matches_oracle(impl, r, case), dtypes=record.dtypes,
                       calls=(record.fn,))


def _exactly_scalable(arg) -> bool:
    case, k = arg
    x = case.arrays["x"].astype(np.float64)
    with np.errstate(over="ignore"):
        scaled = (x * 2.0**k).astype(case.arrays["x"].dtype).astype(np.float64)
    return case.params["eps"] > 0 and np.isfinite(scaled).all() and np.array_equal(scaled, x * 2.0**k)


@st.composite
def _rope_invariant_args(draw, dtype: str):
    case = draw(rope_cases(dtype), label="case")
    k = fill(np.random.default_rng(case.seed + 1), "normal", case.arrays["x"].shape, dtype)
    q_pos = case.arrays["positions"].astype(np.int64)
    k_pos = q_pos[::-1].copy()
    shift = draw(st.sampled_from([1, 3, 1000, -int(min(k_pos.min(), q_pos.min()))]), label="shift")
    offset = draw(st.integers(0, q_pos.size - 1), label="offset")
    return case, k, k_pos, shift, offset


def _rope_invariants(impl, arg) -> None:
    case, k, k_pos, shift, offset = arg
    oc.check_rope_pair_norms(impl, case)
    oc.check_rope_relative(impl, case, k, k_pos, shift)
    oc.check_rope_offset(impl, case, offset)


@st.composite
def _causality_args(draw, dtype: str):
    case = draw(attention_cases(dtype).filter(lambda c: c.arrays["k_pos"].max() > c.arrays["q_pos"].min()), label="case")
    q_pos, k_pos = case.arrays["q_pos"], case.arrays["k_pos"]
    cutoff = draw(st.sampled_from(sorted({int(p) for p in q_pos if (k_pos > p).any()})), label="cutoff")
    return case, cutoff, draw(st.sampled_from(["random", "nan", "inf"]), label="poison")


@st.composite
def _permuted_args(draw, dtype: str):
    case = draw(attention_cases(dtype), label="case")
    perm = np.random.default_rng(draw(st.integers(0, 2**16), label="perm seed")).permutation(case.arrays["k"].shape[0])
    return case, perm, draw(st.integers(1, 3), label="chunks")


PROPERTIES: list[Property] = [_oracle_prop(r) for r in OP_RECORDS] + [
    op_property("rms_norm_scale_invariance", "rms_norm",
               lambda d: st.tuples(norm_cases("rms_norm", d), st.integers(-8, 8)).filter(_exactly_scalable),
               lambda impl, a: oc.check_rms_scale_invariance(impl, *a)),
    op_property("rope_invariants", "rope", _rope_invariant_args, _rope_invariants),
    op_property("softcap_odd_bounded_near_identity", "softcap", OPS["softcap"].cases, oc.check_softcap_shape),
    op_property("gelu_tanh_within_gap_of_erf", "gelu", OPS["gelu_tanh"].cases, oc.check_gelu_gap),
    op_property("masked_softmax_equals_truncated", "softmax",
               lambda d: row_cases("softmax", d, LOGIT_FAMS, st.fixed_dictionaries(
                   {"scale": st.sampled_from([1.0, 0.125, 2.0])}), axes=True, force_mask=True),
               oc.check_masked_equals_truncated),
    op_property("log_softmax_is_log_of_softmax", "log_softmax", OPS["log_softmax"].cases,
               oc.check_log_softmax_is_log_softmax, calls=("log_softmax", "softmax")),
    op_property("step_vs_oracle", "attention_step", step_cases, lambda impl, a: ac.check_step_matches_oracle(impl, *a),
               group="attention", calls=("KVCache", "attention_step")),
    op_property("decode_equals_prefill", "attention_step", step_cases,
               lambda impl, a: ac.check_decode_equals_prefill(impl, *a), group="attention",
               calls=("KVCache", "attention_step")),
    op_property("causality", "attention", _causality_args, lambda impl, a: ac.check_causality(impl, *a),
               group="attention"),
    op_property("gqa_equals_mha", "attention", lambda d: attention_cases(d).filter(lambda c: c.shape["group"] > 1),
               ac.check_gqa_equals_mha, group="attention"),
    op_property("permuted_cache", "attention", _permuted_args, lambda impl, a: ac.check_permuted_cache(impl, *a),
               group="attention", calls=("KVCache", "attention_decode")),
]

PROPERTIES_BY_NAME = {p.name: p for p in PROPERTIES}


def properties(group: str) -> list[Property]:
    return [p for p in PROPERTIES if p.group == group]


def property_params(group: str) -> list:
    return [pytest.param(p, d, id=f"{p.name}-{d}") for p in properties(group) for d in p.points()]


def run_property(oimpl: Impl, prop: Property, dtype: str, data: st.DataObject) -> None:
    """Draw one example, run the property, record what it measured with the example."""
    example = data.draw(prop.draw(dtype), label="example")
    with covered():
        result = prop.body(oimpl, dtype, example)
    if result is None:
        recording.note(prop.subject, prop.name, dtype)
    else:
        recording.note_errors(prop.subject, prop.name, dtype, *result, case=example)
