"""Property 8: awkward and bad input. Where llama.cpp defines a result (awkward but valid input),
oracle and implementation must both give it and agree on it (property 1): refusing valid input
fails under every contract. Where the input is bad (NaN, +inf, wrong dtype or shape), the oracle
refuses with a ValueError; the implementation must too when its contract says so (``--contract
strict``, or its own ``LOGITCHECK_CLAIMS``), and is otherwise graded (the report's robustness
section), not failed: a kernel that never inspects its input is not wrong on valid input."""
from __future__ import annotations

import numpy as np
import pytest

from properties import numerics, recording
from properties.samplers.records import RECORDS_BY_NAME
from properties.samplers.checks import check_matches_oracle
from properties.plugin import covered
from properties.samplers.strategies import Case, make_logits

ROW = make_logits("peaked", 17, 3)
F16_OVERFLOW = np.array([1.0, np.inf, -np.inf, 2.0], dtype=np.float16)  # what casting [1, 7e4, -7e4, 2] to fp16 gives

# (id, record, logits [B, V], params as given to the record; "ok" = llama.cpp defines a result)
CASES = [
    ("top_k k>vocab", "top_k", ROW[None], {"k": np.array([40])}, "ok"),
    ("top_k negative k", "top_k", ROW[None], {"k": np.array([-3])}, "ok"),
    ("top_p p<0", "top_p", ROW[None], {"p": np.array([-0.5]), "min_keep": np.array([0])}, "ok"),
    ("top_p p>1", "top_p", ROW[None], {"p": np.array([1.5]), "min_keep": np.array([0])}, "ok"),
    ("min_p p<0", "min_p", ROW[None], {"p": np.array([-0.1]), "min_keep": np.array([0])}, "ok"),
    ("min_p p>1", "min_p", ROW[None], {"p": np.array([1.5]), "min_keep": np.array([2])}, "ok"),
    ("typical p<0", "typical", ROW[None], {"p": np.array([-1.0]), "min_keep": np.array([0])}, "ok"),
    ("temp t=0", "temp", ROW[None], {"t": np.array([0.0])}, "ok"),
    ("temp t<0", "temp", ROW[None], {"t": np.array([-2.0])}, "ok"),
    ("temp huge logits", "temp", (ROW * 1e37)[None].astype(np.float32), {"t": np.array([0.5])}, "ok"),
    ("softmax-path subnormal logits", "top_p", (ROW * 1e-42)[None].astype(np.float32),
     {"p": np.array([0.5]), "min_keep": np.array([0])}, "ok"),
    ("greedy all -inf row", "greedy", np.full((1, 5), -np.inf, np.float32), {}, "ValueError"),
    ("dist all -inf row", "dist", np.full((1, 5), -np.inf, np.float32), {"u": np.array([0.5])}, "ValueError"),
    ("top_p all -inf row", "top_p", np.full((1, 5), -np.inf, np.float32),
     {"p": np.array([0.5]), "min_keep": np.array([0])}, "ok"),
    ("fp16 overflow to +inf", "top_k", F16_OVERFLOW[None], {"k": np.array([2])}, "ValueError"),
    ("NaN parameter", "top_p", ROW[None], {"p": np.array([np.nan]), "min_keep": np.array([0])}, "ValueError"),
    ("inf temperature", "temp", ROW[None], {"t": np.array([np.inf])}, "ValueError"),
    ("repeat penalty 0", "penalties", ROW[None], {"history": np.array([[1, 2]]), "last_n": np.array([8]),
     "repeat": np.array([0.0]), "freq": np.array([0.0]), "present": np.array([0.0])}, "ValueError"),
    ("+inf logit bias", "logit_bias", ROW[None], {"bias_ids": np.array([[3, -1, -1, -1]]),
     "bias_vals": np.array([[np.inf, 0, 0, 0]])}, "ValueError"),
    ("integer logits", "top_k", np.arange(8, dtype=np.int32)[None], {"k": np.array([2])}, "ValueError"),
    ("complex logits", "top_k", (ROW + 0j)[None], {"k": np.array([2])}, "ValueError"),
]


def _oracle_decision(record, logits: np.ndarray, params: dict) -> str:
    case = Case("given", logits.shape[1], "float32", (0,) * logits.shape[0], params, logits)
    try:
        for b in range(case.batch):
            cur = record.run_oracle(logits[b], case.row_params(b))
            if record.kind == "select":
                cur.selected_token  # noqa: B018 - raises if nothing was selectable
    except ValueError:
        return "ValueError"
    return "ok"


def _impl_decision(impl, record, logits: np.ndarray, params: dict) -> str:
    try:
        record.impl(impl, logits, params)
    except ValueError:
        return "ValueError"
    return "ok"


@pytest.mark.parametrize("name, rec, logits, params, expected", CASES, ids=[c[0] for c in CASES])
def test_same_decision(impl, name, rec, logits, params, expected):
    record = RECORDS_BY_NAME[rec]
    assert _oracle_decision(record, logits, params) == expected, f"oracle: {name}"
    with covered():
        got = _impl_decision(impl, record, logits, params)
    if expected == "ValueError" and got != expected and not numerics.contract(impl).refuses_bad_input:
        recording.robustness("bad input", name, False, f"{rec}: returned a result instead of a ValueError")
        return
    assert got == expected, f"impl: {name}"
    if expected == "ValueError":
        recording.robustness("bad input", name, True, "")
    if expected == "ok" and np.issubdtype(logits.dtype, np.floating):
        with covered():
            check_matches_oracle(impl, record, Case("given", logits.shape[1], "float32", (0,), params,
                                                    logits.astype(np.float32)))


IMPL_ONLY = [
    ("empty vocabulary", "top_k", np.zeros((1, 0), np.float32), {"k": np.array([1])}),
    ("1-D logits", "top_k", ROW, {"k": np.array([1])}),
    ("parameter shape != batch", "top_k", np.stack([ROW, ROW]), {"k": np.array([1, 2, 3])}),
    ("2-D parameter", "top_p", np.stack([ROW, ROW]), {"p": np.array([[0.5, 0.5]]), "min_keep": np.array([0, 0])}),
    ("uniform outside [0, 1)", "dist", ROW[None], {"u": np.array([1.5])}),
    ("history id outside vocab", "penalties", ROW[None], {"history": np.array([[99]]), "last_n": np.array([8]),
     "repeat": np.array([1.5]), "freq": np.array([0.0]), "present": np.array([0.0])}),
]


@pytest.mark.parametrize("name, rec, logits, params", IMPL_ONLY, ids=[c[0] for c in IMPL_ONLY])
def test_impl_rejects_malformed_call(impl, name, rec, logits, params):
    """Shapes the oracle cannot even express (it is one row at a time) are refused clearly where
    the contract demands refusals, and graded otherwise."""
    with covered():
        try:
            RECORDS_BY_NAME[rec].impl(impl, logits, params)
        except ValueError:
            recording.robustness("bad input", name, True, "")
            return
    assert not numerics.contract(impl).refuses_bad_input, f"{name}: returned a result instead of a ValueError"
    recording.robustness("bad input", name, False, f"{rec}: returned a result instead of a ValueError")


def test_oracle_rejects_empty_vocabulary():
    from oracle.candidates import TokenDataArray

    with pytest.raises(ValueError, match="empty"):
        TokenDataArray.from_logits(np.zeros(0))
