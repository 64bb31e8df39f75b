"""The harness protocol (docs/protocol.md) judged with a harness that misbehaves on purpose
(properties/protocol/testing/pyharness.py): the framing, the signature table, and the correct
harness; each fault's verdict, restart, time and memory are in test_faults.py."""
from __future__ import annotations

import numpy as np
import pytest

from properties.backends import NotCovered
from properties.protocol import framing
from properties.protocol.signatures import argument_names, check_results, table
from properties.protocol.testing.fixtures import judged, own_not_covered  # noqa: F401 (an autouse fixture)

X = np.random.default_rng(0).normal(size=(2, 300)).astype(np.float32)
P = np.array([0.9, 0.5])


def test_a_correct_harness_answers_as_the_module_would():
    import gpu_impl

    impl = judged()
    assert np.array_equal(impl("top_p", X, P, 0), gpu_impl.top_p(X, P, 0))
    assert np.array_equal(impl("dist", X, np.array([0.1, 0.7])), gpu_impl.dist(X, np.array([0.1, 0.7])))
    assert impl.has("softmax") and not impl.has("typical")  # typical: NOT COVERED, never called
    with pytest.raises(NotCovered):
        impl("typical", X, P)


def test_refused_is_a_value_error_and_unsupported_is_not_covered():
    with pytest.raises(ValueError, match="refused top_p: told to refused"):
        judged("refused")("top_p", X, P, 0)
    with pytest.raises(NotCovered, match="does not support this case of top_p"):
        judged("unsupported")("top_p", X, P, 0)
    with pytest.raises(ValueError, match="NaN"):  # the module's own refusal travels as ERROR refused
        judged()("softmax", np.full((1, 4), np.nan, np.float32))


def test_empty_and_scalar_arguments_travel():
    """An empty history ([1, 0]) and scalars: the harness gets them (a penalties call with no
    history is the identity), not a client-side error turned NOT COVERED."""
    import gpu_impl

    impl = judged(functions="penalties")
    empty = np.zeros((2, 0), np.int64)
    out = impl("penalties", X, empty, 8, 1.1, 0.0, 0.0)
    assert np.array_equal(out, gpu_impl.penalties(X, empty, 8, 1.1, 0.0, 0.0))
    parts = framing.encode_call("penalties", [("history", empty), ("last_n", 8)])
    assert b"".join(parts) == b"CALL penalties 2\nARG history i64 2 2 0\nARG last_n i64 0\n" + np.int64(8).tobytes()
    assert framing.encode_call("penalties", [], call_id=7)[0] == b"CALL 7 penalties 0\n"  # version 2


def test_framing_round_trips_and_refuses_bad_headers():
    call = b"".join(framing.encode_call("top_p", [("logits", X.astype(np.float16)), ("p", 0.5), ("min_keep", 3)]))
    assert call.startswith(b"CALL top_p 3\nARG logits f32 2 2 300\n")
    assert b"ARG p f64 0\n" in call and b"ARG min_keep i64 0\n" in call
    for bad in (["RESULT", "f33", "1", "4"], ["RESULT", "f32", "2", "4"], ["RESULT", "f32", "x"], ["OK", "1"]):
        with pytest.raises(framing.FrameError):
            framing.parse_array_header(bad, "RESULT")


def test_signature_table_is_read_from_the_code():
    import inspect

    import gpu_impl.ops

    names = {r.qualified for r in table()}
    assert {"top_p", "ops.rms_norm", "quants.dequantize", "engines.llama_cpp_chain"} <= names
    assert argument_names("ops.rms_norm") == tuple(inspect.signature(gpu_impl.ops.rms_norm).parameters)
    assert check_results("dist", {"logits": X}, [np.zeros(2, np.int64)]) is None
    assert check_results("dist", {"logits": X}, [np.zeros(2, np.int32)]) is None
    assert "integer ids" in check_results("dist", {"logits": X}, [np.zeros(2, np.float32)])
    assert "float32" in check_results("top_p", {"logits": X}, [np.zeros((2, 300), np.float64)])
    assert "shape" in check_results("top_p", {"logits": X}, [np.zeros((2, 299), np.float32)])
