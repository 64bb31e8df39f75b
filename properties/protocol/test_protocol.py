"""The harness protocol (docs/protocol.md) judged with a harness that misbehaves on purpose
(properties/protocol/testing/pyharness.py): each fault class fails the call that met it with a
message naming the call, the process is restarted, and the next call is answered."""
from __future__ import annotations

import sys

import numpy as np
import pytest

from properties.backends import NotCovered, load_impl
from properties.protocol import framing
from properties.protocol.harness import HarnessFault, exec_module
from properties.protocol.signatures import argument_names, check_results, table

HARNESS = f"{sys.executable} -m properties.protocol.testing.pyharness"
X = np.random.default_rng(0).normal(size=(2, 300)).astype(np.float32)
P = np.array([0.9, 0.5])


@pytest.fixture(autouse=True)
def _own_not_covered():
    """These harnesses are the suite's own: what they lack is not the run's NOT COVERED list."""
    from properties.backends import NOT_COVERED

    before = set(NOT_COVERED)
    yield
    NOT_COVERED.intersection_update(before)


def _impl(fault: str | None = None, on: str = "top_p", functions: str = "softmax,top_p,dist"):
    extra = f" --fault {fault} --on {on}" if fault else ""
    return load_impl("gpu_impl", "numpy", exec_module(f"{HARNESS} --functions {functions}{extra}"))


def test_a_correct_harness_answers_as_the_module_would():
    import gpu_impl

    impl = _impl()
    assert np.array_equal(impl("top_p", X, P, 0), gpu_impl.top_p(X, P, 0))
    assert np.array_equal(impl("dist", X, np.array([0.1, 0.7])), gpu_impl.dist(X, np.array([0.1, 0.7])))
    assert impl.has("softmax") and not impl.has("typical")  # typical: NOT COVERED, never called
    with pytest.raises(NotCovered):
        impl("typical", X, P)


@pytest.mark.parametrize("fault, starts", [
    ("crash", "harness crashed"), ("malformed", "harness sent a malformed frame"),
    ("short", "harness sent a short frame"), ("wrong_shape", "harness answered with the wrong shape/dtype"),
    ("wrong_dtype", "harness answered with the wrong shape/dtype"), ("failed", "harness reported a failure"),
])
def test_each_fault_fails_the_call_names_it_and_the_run_goes_on(fault, starts):
    impl = _impl(fault, on="top_p")
    with pytest.raises(HarnessFault) as info:
        impl("top_p", X, P, 0)
    message = str(info.value)
    assert message.startswith(starts), message
    assert "top_p(logits f32[2,300], p f64[2], min_keep=0)" in message, message
    assert np.isfinite(impl("softmax", X)).all()  # the next call is answered (restarted if it died)


def test_a_hang_is_cut_by_the_timeout(monkeypatch):
    monkeypatch.setenv("LOGITCHECK_EXEC_TIMEOUT", "2")
    impl = _impl("hang", on="top_p")
    with pytest.raises(HarnessFault, match=r"^harness hung: no complete answer to top_p\(.*within 2 s"):
        impl("top_p", X, P, 0)
    assert impl("softmax", X).shape == X.shape
    assert impl.module.HARNESS.restarts == 1


def test_refused_is_a_value_error_and_unsupported_is_not_covered():
    with pytest.raises(ValueError, match="refused top_p: told to refused"):
        _impl("refused")("top_p", X, P, 0)
    with pytest.raises(NotCovered, match="does not support this case of top_p"):
        _impl("unsupported")("top_p", X, P, 0)
    with pytest.raises(ValueError, match="NaN"):  # the module's own refusal travels as ERROR refused
        _impl()("softmax", np.full((1, 4), np.nan, np.float32))


def test_a_broken_handshake_fails_every_call_never_not_covered():
    impl = load_impl("x", "numpy", exec_module("echo HELLO; sleep 1"))
    assert impl.has("top_p") and impl.has("typical")  # a broken harness "implements" everything
    with pytest.raises(HarnessFault, match="harness unusable: handshake with .* failed"):
        impl("top_p", X, P, 0)
    with pytest.raises(HarnessFault, match="harness unusable: cannot start|handshake"):
        load_impl("x", "numpy", exec_module("/nonexistent/harness"))("softmax", X)


def test_empty_and_scalar_arguments_travel():
    """An empty history ([1, 0]) and scalars: the harness gets them (a penalties call with no
    history is the identity), not a client-side error turned NOT COVERED."""
    import gpu_impl

    impl = _impl(functions="penalties")
    empty = np.zeros((2, 0), np.int64)
    out = impl("penalties", X, empty, 8, 1.1, 0.0, 0.0)
    assert np.array_equal(out, gpu_impl.penalties(X, empty, 8, 1.1, 0.0, 0.0))
    parts = framing.encode_call("penalties", [("history", empty), ("last_n", 8)])
    assert b"".join(parts) == b"CALL penalties 2\nARG history i64 2 2 0\nARG last_n i64 0\n" + np.int64(8).tobytes()


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
    assert "expected integer ids" in check_results("dist", {"logits": X}, [np.zeros(2, np.float32)])
    assert "shape" in check_results("top_p", {"logits": X}, [np.zeros((2, 299), np.float32)])
