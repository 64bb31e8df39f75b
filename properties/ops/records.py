"""One record per op: how to draw its inputs, call oracle and implementation, and judge the
difference (an error model in units of u from ``models``, or exact equality).

Tests in ``test_ops.py`` are generated from ``OP_RECORDS``; adding an op means an oracle
function, an impl function of the same name and signature, a strategy and one record here.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from hypothesis import strategies as st

from oracle import ops as oracle_ops
from properties.numerics import F32_MAX, gamma
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
    gate: Callable[[OpCase], int | None] | None = None
    """The reduction length n of the Higham-Mary gate (``measure.hm_gate``) where the strategy
    draws terms of random sign (products with a zero-mean operand); None: worst case only."""
    domain: Callable[[OpCase], str | None] = lambda case: None
    """Why a case lies outside the default contract's input domain (None: inside). Outside it
    the result is a robustness grade, judged only by a contract that claims overflow safety."""
    domain_text: str = "every finite input"

    def __repr__(self) -> str:
        return self.name

    def oracle(self, case: OpCase) -> Any:
        return getattr(oracle_ops, self.fn)(**case.kwargs)

    def impl(self, impl: Any, case: OpCase) -> Any:
        return impl(self.fn, **case.kwargs)


MATMUL_K = (1, 2, 16, 31, 32, 33, 64, 128, 255, 256, 257, 1000, 1023, 1024, 1025, 4095, 4096, 4097)
MATMUL_MN_EDGES = (31, 32, 33, 63, 64, 65)


@st.composite
def _matmul_cases(draw, dtype: str) -> OpCase:
    k = draw(st.sampled_from(MATMUL_K), label="k")
    # tile edges for m and n too, with a small other side where K is long (cost)
    edge = st.sampled_from(MATMUL_MN_EDGES if k <= 1025 else MATMUL_MN_EDGES[:3])
    shape = {"m": draw(st.one_of(st.integers(1, 8), edge), label="m"), "k": k,
             "n": draw(st.one_of(st.integers(1, 16), edge), label="n")}
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


def _squares_overflow(case: OpCase, centred: bool) -> str | None:
    """Why a norm's float32 sums overflow on this case (the default domain: Σx² and, for
    layer_norm, |Σx| and Σ(x - mean)² representable in float32 after n roundings), or None."""
    x = case.arrays["x"].astype(np.float64)
    n = x.shape[-1]
    limit = F32_MAX / (1 + gamma(n + 1))
    with np.errstate(over="ignore"):
        sums = [("Σx²", (x * x).sum(-1))]
        if centred:
            c = x - x.mean(-1, keepdims=True)
            sums += [("|Σx|", np.abs(x).sum(-1)), ("Σ(x - mean)²", (c * c).sum(-1))]
    for name, v in sums:
        if not (np.abs(x).max(-1) ** 2 < limit).all() or not (v < limit).all():
            return f"{name} = {float(np.max(v)):.3g} overflows float32 (limit {limit:.3g})"
    return None


NORM_DOMAIN = "rows whose float32 sums (Σx²; layer_norm also |Σx| and Σ(x - mean)²) do not overflow"

OP_RECORDS: list[OpRecord] = [
    OpRecord("softmax", "softmax", _rows("softmax", LOGIT_FAMS, _softmax_params(), masks=True, axes=True),
             m.softmax_model, "p_i relative: 2|z_i - m| + 4 + argument roundings, the row's p-weighted mean of "
             "those, (n - 1) for the sum, 2 for the division"),
    OpRecord("log_softmax", "log_softmax", _rows("log_softmax", LOGIT_FAMS, _softmax_params(), masks=True, axes=True),
             m.log_softmax_model, "softmax's normaliser error + 2|z_i - m| + 2|ln S| + |y_i| + 3, relative to "
             "1 + |z_i - m| + |y_i| + |ln S|"),
    OpRecord("rms_norm", "rms_norm", lambda d: norm_cases("rms_norm", d), m.rms_norm_model,
             "(n + 2)/2 + 12 relative to |x_i·w_i|/rms", domain=lambda c: _squares_overflow(c, False),
             domain_text=NORM_DOMAIN),
    OpRecord("layer_norm", "layer_norm", lambda d: norm_cases("layer_norm", d), m.layer_norm_model,
             "1.5n + 16 relative to |w|(|x - mean| + mean|x|)/σ + |b|", domain=lambda c: _squares_overflow(c, True),
             domain_text=NORM_DOMAIN),
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
    OpRecord("geglu", "geglu", _rows("geglu", VALUE_FAMS, st.fixed_dictionaries(
        {"approximate": st.sampled_from(["tanh", "none"])})), m.gated_product_model,
             "10 u of (|g| + |gelu g|)·|up|"),
    OpRecord("softcap", "softcap", _rows("softcap", LOGIT_FAMS + ("wide",), st.fixed_dictionaries(
        {"cap": st.sampled_from([30.0, 50.0, 15.0, 1.0, 100.0])})), m.softcap_model, "8 u relative"),
    OpRecord("embedding", "embedding", _embedding_cases, m.embedding_model, "2 u relative (scale rounding, product)"),
    OpRecord("matmul", "matmul", _matmul_cases, m.matmul_model,
             "(K + 2) u of (|A|·|B|)_ij (a tree: ⌈log2 K⌉ + 3 under strict); K >= 1,000: the 99th "
             "percentile of err/(√K·u·(|A|·|B|)_ij) <= 1 (B has random signs)",
             gate=lambda c: c.shape["k"]),
    OpRecord("project_qkv", "project_qkv", _qkv_cases, m.project_qkv_model,
             "(d_model + 2) u of |x|·|W|ᵀ; the Higham-Mary gate as matmul", gate=lambda c: c.shape["d_model"]),
    OpRecord("output_logits", "output_logits", _logits_cases, m.output_logits_model,
             "(d + 2) u of |h|·|W|ᵀ; with softcap (d + 10) u of that + |y|; without, the gate as matmul",
             gate=lambda c: None if c.params.get("softcap") else c.shape["d"]),
    OpRecord("argmax", "argmax", _rows("argmax", LOGIT_FAMS), None,
             "exact: the first index of the maximum"),
]

OP_RECORDS_BY_NAME = {r.name: r for r in OP_RECORDS}
