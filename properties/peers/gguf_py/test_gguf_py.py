"""The oracle against the real peer, gguf-py 0.19.0 (``gguf.quants``): dequantization bit for bit
on arbitrary bytes with special scales, quantization byte for byte on edge-case floats.

Findings (each pinned by a test below, each with its witness):
1. For a block whose float32 scale d is so small that 1/d overflows (max|x| < ~2^-121 for Q8_0),
   ggml's reference converts ±inf / NaN to an integer: undefined behaviour in C. gguf-py then
   yields whatever NumPy's float->uint8/int8 cast gives on the host (x86-64: 0). The oracle pins
   the x86-64 result, so it agrees with gguf-py here, and says so.
2. Non-finite inputs to the block quantizers are undefined in the reference; gguf-py silently
   emits bytes, the oracle refuses with ValueError.
3. MXFP4's e8m0 byte 0xFF decodes to 2^127 in ggml and gguf-py (not NaN as in the OCP MX spec);
   the oracle follows ggml.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, strategies as st

import oracle.quants as oq
from properties import recording
from properties.peers.gguf_py.adapter import peer_dequantize, peer_quantize
from properties.quants.records import BY_NAME, RECORDS, quant_records
from properties.quants.checks import bit_mismatch, fail
from properties.quants.strategies import fill_raw, fill_values, raw_cases, value_cases

pytestmark = pytest.mark.peer


@pytest.mark.parametrize("record", RECORDS, ids=str)
@given(data=st.data())
def test_dequantize_equals_gguf_py(record, data):
    case = data.draw(raw_cases([record]), label="case")
    got = oq.dequantize(case.raw, record.qtype, case.shape)
    why = bit_mismatch(got, peer_dequantize(case.raw, int(record.qtype), case.shape))
    if why:
        fail("oracle == gguf-py dequantize", case, why)
    recording.note(record.name, "peer_gguf_dequantize", "raw")


@pytest.mark.parametrize("record", quant_records(quantizable=True), ids=str)
@given(data=st.data())
def test_quantize_equals_gguf_py(record, data):
    case = data.draw(value_cases([record]), label="case")
    got = oq.quantize(case.values, record.qtype)
    want = peer_quantize(case.values, int(record.qtype))
    if got.shape != want.shape or not np.array_equal(got, want):
        diff = np.argwhere(got != want) if got.shape == want.shape else "shape"
        fail("oracle == gguf-py quantize", case, f"bytes differ at {diff[:4].tolist() if isinstance(diff, np.ndarray) else diff}")
    recording.note(record.name, "peer_gguf_quantize", case.family)


EXPLICIT = [  # edge values named by the issue, each as a one-block witness
    ("zeros", np.zeros(32)), ("negative zeros", -np.zeros(32)),
    ("ties at .5 (d = 1)", np.r_[-127.0, np.arange(-15.5, 15.5, 1.0)]),
    ("ties at .5 (d = 1/2)", np.r_[-8.0, np.arange(-7.75, 7.75, 0.5)]),
    ("huge", np.r_[3.4e38, -3.4e38, np.linspace(-3e38, 3e38, 30)]),
    ("smallest subnormals", np.r_[1e-45, -1e-45, np.zeros(30)]),
    ("1/d overflows (finding 1)", np.r_[1e-39, -5e-40, np.linspace(-1e-39, 1e-39, 30)]),
    ("one spike", np.r_[np.zeros(31), 1.0]),
    ("max == min", np.full(32, 0.1)),
]


@pytest.mark.parametrize("record", quant_records(quantizable=True), ids=str)
@pytest.mark.parametrize("label, values", EXPLICIT, ids=[e[0] for e in EXPLICIT])
def test_quantize_edge_values_equal_gguf_py(record, label, values):
    x = np.asarray(values, dtype=np.float32)[None, :]
    np.testing.assert_array_equal(oq.quantize(x, record.qtype), peer_quantize(x, int(record.qtype)),
                                  err_msg=f"{record.name} on {label}")


_FINDINGS: list[dict] = []


@pytest.mark.parametrize("name", ["Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0"])
def test_nonfinite_input_refused_where_gguf_py_emits_bytes(name):
    """Finding 2: witness x = [nan, inf, 1, 0, ...]; gguf-py returns bytes, the oracle refuses."""
    x = np.r_[np.nan, np.inf, 1.0, np.zeros(29)].astype(np.float32)[None, :]
    emitted = peer_quantize(x, int(BY_NAME[name].qtype))
    with pytest.raises(ValueError, match="non-finite"):
        oq.quantize(x, BY_NAME[name].qtype)
    _FINDINGS.append({"format": name, "finding": "non-finite input: gguf-py emits bytes (C reference UB), oracle raises",
                      "witness": "[nan, inf, 1, 0 x 29]", "gguf_py_bytes": emitted[0, :6].tolist()})
    recording.table("quant_peer_findings", _FINDINGS)


def test_e8m0_ff_is_two_to_the_127_not_nan():
    """Finding 3: one MXFP4 block with scale byte 0xFF and codes 1 (=0.5·2) everywhere."""
    raw = np.r_[0xFF, np.full(16, 0x11)].astype(np.uint8)
    ours, theirs = oq.dequantize(raw, oq.QType.MXFP4, (32,)), peer_dequantize(raw, 39, (1, 32))[0]
    assert ours[0] == theirs[0] == np.float32(2.0**127)
    _FINDINGS.append({"format": "MXFP4", "finding": "e8m0 0xFF decodes to 2^127 (ggml), not NaN (OCP MX)",
                      "witness": "scale byte 0xff, codes 0x11"})
    recording.table("quant_peer_findings", _FINDINGS)


def test_tiny_block_codes_follow_the_host_cast():
    """Finding 1 witness: Q8_0 block max 1e-39 -> d ~ 7.9e-42, 1/d = inf, codes come from casting
    ±inf / NaN; on x86-64 every code is 0, and the oracle pins exactly that."""
    x = fill_values("subnormal", (1, 32), 32, 0, 1e-39)
    got, want = oq.quantize(x, oq.QType.Q8_0), peer_quantize(x, 8)
    np.testing.assert_array_equal(got, want)
    assert not got[0, 2:].any()
    _FINDINGS.append({"format": "Q4_0/Q4_1/Q5_0/Q5_1/Q8_0", "finding": "1/d overflow: codes from float->int cast of "
                      "inf/NaN (C UB; gguf-py host-dependent; oracle pins x86-64 = 0)", "witness": "fill_values('subnormal', seed 0)"})
    recording.table("quant_peer_findings", _FINDINGS)


def test_fill_raw_is_deterministic():
    """Witnesses are (format, rows, blocks, seed, kinds): the same draw must rebuild the same bytes."""
    a = fill_raw(RECORDS[3], 2, 3, 7, ["nan", "random", "zero", "max", "subnormal", "-inf"])
    b = fill_raw(RECORDS[3], 2, 3, 7, ["nan", "random", "zero", "max", "subnormal", "-inf"])
    assert np.array_equal(a.raw, b.raw)
