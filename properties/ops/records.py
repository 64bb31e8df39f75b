"""One record per op: how to draw its inputs, call oracle and implementation, and judge the
difference (an error model in units of u from ``models``, or exact equality).

Tests in ``test_ops.py`` are generated from ``OP_RECORDS``; adding an op means an oracle
function, an impl function of the same name and signature, a strategy and one record here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

from hypothesis import strategies as st

from oracle import ops as oracle_ops
from properties.ops import models as m
from properties.ops.strategies import (HEAD_DIMS, OpCase, attention_cases, norm_cases, rope_cases,
                                       row_cases, SEEDS)
from properties.samplers.strategies import FAMILIES as LOGIT_FAMILIES

Model = Callable[[OpCase, Any], tuple[Any, Any]]
VALUE_FAMS = ("normal", "scaled", "wide", "outlier", "ties", "huge", "near_max", "tiny")
MATMUL_FAMS = ("normal", "scaled", "wide", "outlier", "ties", "tiny", "offset")


@dataclass(frozen=True)
class OpRecord:
    name: str
    fn: str
    """The function name, the same in oracle.ops and in the implementation."""
    cases: Callable[[str], st.SearchStrategy[OpCase]]
    model: Model | None
    """None: the result is discrete and must equal the oracle's exactly."""
    allowance: str
    dtypes: tuple[str, ...] = ("float32", "float16", "bfloat16")

    def __repr__(self) -> str:
        return self.name

    def oracle(self, case: OpCase) -> Any:
        return getattr(oracle_ops, self.fn)(**case.kwargs)

    def impl(self, impl: Any, case: OpCase) -> Any:
        return impl(self.fn, **case.kwargs)


@st.composite
def _matmul_cases(draw, dtype: str) -> OpCase:
    shape = {"m": draw(st.integers(1, 8), label="m"), "k": draw(st.sampled_from([1, 2, 16, 64, 128, 1000, 4096]), label="k"),
             "n": draw(st.integers(1, 16), label="n")}
    fam = draw(st.sampled_from(MATMUL_FAMS), label="family")
    return OpCase("matmul", dtype, fam, draw(SEEDS, label="seed"), shape)


@st.composite
def _logits_cases(draw, dtype: str) -> OpCase:
    vocab = draw(st.sampled_from([1, 7, 100, 1000, 4096]), label="vocab")
    shape = {"tokens": draw(st.integers(1, 4), label="tokens"), "d": draw(st.sampled_from([8, 64, 256]), label="d"),
             "vocab": vocab, "pad": draw(st.sampled_from([0, 0, 1, 64]), label="pad")}
    p = {"n_vocab": vocab, "softcap": draw(st.sampled_from([0.0, 30.0]), label="softcap")}
    return OpCase("output_logits", dtype, draw(st.sampled_from(("normal", "scaled", "wide")), label="family"),
                  draw(SEEDS, label="seed"), shape, p)


@st.composite
def _qkv_cases(draw, dtype: str) -> OpCase:
    hkv = draw(st.sampled_from([1, 2, 4]), label="n_kv_head")
    hq = hkv * draw(st.sampled_from([1, 2, 4]), label="group")
    d = draw(st.sampled_from(HEAD_DIMS[:5]), label="head_dim")
    d_model = hq * d if draw(st.booleans(), label="d_model=n_head·head_dim") else draw(st.sampled_from([8, 48]), label="d_model")
    p = {"n_head": hq, "n_kv_head": hkv, "head_dim": d}
    return OpCase("project_qkv", dtype, draw(st.sampled_from(("normal", "scaled")), label="family"),
                  draw(SEEDS, label="seed"), {"tokens": draw(st.integers(1, 4), label="tokens"), "d_model": d_model}, p)


@st.composite
def _embedding_cases(draw, dtype: str) -> OpCase:
    d = draw(st.sampled_from([1, 8, 64, 3072]), label="d")
    scale = draw(st.sampled_from(["sqrt_d", 1.0, 0.5, 33.3]), label="scale")
    # the whole table is filled per example: keep it under 2^21 entries
    vocab = draw(st.sampled_from([v for v in (1, 10, 1000, 32000) if v * d <= 2**21]), label="vocab")
    shape = {"vocab": vocab, "d": d,
             "tokens": draw(st.integers(1, 6), label="tokens")}
    p = {"scale": d**0.5 if scale == "sqrt_d" else scale}
    return OpCase("embedding", dtype, draw(st.sampled_from(("normal", "wide")), label="family"),
                  draw(SEEDS, label="seed"), shape, p)


def _softmax_params() -> st.SearchStrategy[dict]:
    return st.fixed_dictionaries({"scale": st.sampled_from([1.0, 1.0, 128**-0.5, 0.5, 2.0, 30.0])})


def _rows(op: str, families: tuple[str, ...], params=st.just({}), **kw) -> Callable[[str], st.SearchStrategy[OpCase]]:
    return lambda dtype: row_cases(op, dtype, families, params, **kw)


LOGIT_FAMS = tuple(LOGIT_FAMILIES)

OP_RECORDS: list[OpRecord] = [
    OpRecord("softmax", "softmax", _rows("softmax", LOGIT_FAMS, _softmax_params(), masks=True, axes=True),
             m.softmax_model, "p_i relative: 2|z_i - m| + 4 + argument roundings, the row's p-weighted mean of "
             "those, (n - 1) for the sum, 2 for the division"),
    OpRecord("log_softmax", "log_softmax", _rows("log_softmax", LOGIT_FAMS, _softmax_params(), masks=True, axes=True),
             m.log_softmax_model, "softmax's normaliser error + 2|z_i - m| + 2|ln S| + |y_i| + 3, relative to "
             "1 + |z_i - m| + |y_i| + |ln S|"),
    OpRecord("rms_norm", "rms_norm", lambda d: norm_cases("rms_norm", d), m.rms_norm_model,
             "(n + 2)/2 + 12 relative to |x_i·w_i|/rms"),
    OpRecord("layer_norm", "layer_norm", lambda d: norm_cases("layer_norm", d), m.layer_norm_model,
             "1.5n + 16 relative to |w|(|x - mean| + mean|x|)/σ + |b|"),
    OpRecord("rope", "rope", lambda d: rope_cases(d), m.rope_model,
             "|theta|·(6 + 2i) + 12 relative to mscale·(pair norm); pass-through dims exact"),
    OpRecord("attention", "attention", lambda d: attention_cases(d), m.attention_model,
             "scores (Dk + 2)·scale·Σ|q||k|, exp 2|s - m| + 4, normaliser and value sums n each; relative to Σ p|v|"),
    OpRecord("gelu_tanh", "gelu", _rows("gelu", VALUE_FAMS, st.just({"approximate": "tanh"})), m.gate_model,
             "8 u of |x| + |y|"),
    OpRecord("gelu_erf", "gelu", _rows("gelu", VALUE_FAMS, st.just({"approximate": "none"})), m.gate_model,
             "8 u of |x| + |y|"),
    OpRecord("silu", "silu", _rows("silu", VALUE_FAMS), m.gate_model, "8 u of |x| + |y|"),
    OpRecord("swiglu", "swiglu", _rows("swiglu", VALUE_FAMS), m.gated_product_model, "10 u of (|g| + |silu g|)·|up|"),
    OpRecord("geglu", "geglu", _rows("geglu", VALUE_FAMS, st.just({"approximate": "tanh"})), m.gated_product_model,
             "10 u of (|g| + |gelu g|)·|up|"),
    OpRecord("softcap", "softcap", _rows("softcap", LOGIT_FAMS + ("wide",), st.fixed_dictionaries(
        {"cap": st.sampled_from([30.0, 50.0, 15.0, 1.0, 100.0])})), m.softcap_model, "8 u relative"),
    OpRecord("embedding", "embedding", _embedding_cases, m.embedding_model, "2 u relative (scale rounding, product)"),
    OpRecord("matmul", "matmul", _matmul_cases, m.matmul_model, "(K + 2) u of (|A|·|B|)_ij"),
    OpRecord("project_qkv", "project_qkv", _qkv_cases, m.project_qkv_model, "(d_model + 2) u of |x|·|W|ᵀ"),
    OpRecord("output_logits", "output_logits", _logits_cases, m.output_logits_model,
             "(d + 2) u of |h|·|W|ᵀ; with softcap (d + 10) u of that + |y|"),
    OpRecord("argmax", "argmax", _rows("argmax", LOGIT_FAMS), None,
             "exact: the first index of the maximum"),
]

OP_RECORDS_BY_NAME = {r.name: r for r in OP_RECORDS}
