"""Bad input for the ops: each entry is a call (or a short KV-cache sequence) and the decision
documented in oracle.ops and gpu_impl.ops — a ValueError whose message names the problem, or
a stated result (which entries are NaN, which values are exact). The oracle and the
implementation must both make it."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import ml_dtypes
import numpy as np

F16, BF16 = np.float16, ml_dtypes.bfloat16


def a(*rows, dtype=np.float32) -> np.ndarray:
    return np.array(rows, dtype=np.float64).astype(dtype)


@dataclass(frozen=True)
class Bad:
    name: str
    run: Callable[[Any], Any]
    """run(api) -> result; api.call(fn, **kw) and api.append(cache, k, v, positions)."""
    raises: str | None = None
    """A ValueError whose message contains this, case-insensitively."""
    expect: Callable[[np.ndarray], bool] | None = None
    """Else: a predicate the result (as float64) must satisfy."""
    says: str = ""


def call(fn: str, **kw: Any) -> Callable[[Any], Any]:
    return lambda api: api.call(fn, **kw)


def nan_rows(rows: list[bool]):
    want = np.array(rows)
    return lambda y: np.array_equal(np.isnan(y).all(axis=-1), want) and np.isfinite(y[~want]).all()


X = a([0.5, -1.0, 2.0, 0.0], [1.0, np.nan, 0.0, 3.0])
Q = np.random.default_rng(0).normal(size=(3, 4, 8)).astype(np.float32)
K = np.random.default_rng(1).normal(size=(3, 2, 8)).astype(np.float32)
P3 = np.arange(3)


def _cache_sequence(*steps: tuple[int, list[int]], capacity: int = 3, heads: int = 2):
    def run(api):
        cache = api.call("KVCache", n_kv_heads=2, head_dim=8, capacity=capacity, v_dim=8)
        for n, pos in steps:
            api.append(cache, np.ones((n, heads, 8), np.float32), np.ones((n, heads, 8), np.float32), np.array(pos))
        return np.zeros(1)
    return run


def _column_nan(y: np.ndarray) -> bool:
    # v[1, kv head 0, dim 2] is NaN: queries 1 and 2 (which see key 1) get NaN in column 2 of heads 0, 1
    want = np.zeros(y.shape, bool)
    want[1:, :2, 2] = True
    return np.array_equal(np.isnan(y), want)


V_NAN = K.copy()
V_NAN[1, 0, 2] = np.nan
Q_NAN = Q.copy()
Q_NAN[0, 3, 5] = np.nan
X_PAIR = np.ones((1, 1, 8), np.float32)
X_PAIR[0, 0, 2] = np.nan

BAD_INPUTS: list[Bad] = [
    Bad("softmax NaN row", call("softmax", x=X), expect=nan_rows([False, True]), says="the NaN row is NaN, others unaffected"),
    Bad("softmax +inf row", call("softmax", x=a([1, np.inf], [0, 0])), expect=nan_rows([True, False])),
    Bad("softmax all -inf row", call("softmax", x=a([-np.inf] * 3, [0, 1, 2])), expect=nan_rows([True, False])),
    Bad("softmax -inf gives exact 0", call("softmax", x=a([-np.inf, 0, 1])), expect=lambda y: y[0, 0] == 0 and np.isfinite(y).all()),
    Bad("log_softmax -inf gives -inf", call("log_softmax", x=a([-np.inf, 0, 1])), expect=lambda y: y[0, 0] == -np.inf and np.isfinite(y[0, 1:]).all()),
    Bad("log_softmax NaN row", call("log_softmax", x=X), expect=nan_rows([False, True])),
    Bad("softmax +inf mask", call("softmax", x=a([0, 1]), mask=a([0, np.inf])), raises="mask"),
    Bad("softmax mask shape", call("softmax", x=a([0, 1, 2, 3], [0, 1, 2, 3]), mask=a([0, 0, 0])), raises="broadcast"),
    Bad("softmax scale 0", call("softmax", x=a([0, 1]), scale=0.0), raises="scale"),
    Bad("softmax scale NaN", call("softmax", x=a([0, 1]), scale=float("nan")), raises="scale"),
    Bad("softmax empty axis", call("softmax", x=np.zeros((2, 0), np.float32)), raises="empty"),
    Bad("softmax axis out of range", call("softmax", x=a([0, 1]), axis=2), raises="axis"),
    Bad("softmax integer input", call("softmax", x=np.array([[1, 2]])), raises="float"),
    Bad("rms_norm zero row eps>0", call("rms_norm", x=a([0, 0, 0], [1, 2, 3]), eps=1e-6), expect=lambda y: (y[0] == 0).all() and np.isfinite(y).all()),
    Bad("rms_norm zero row eps=0", call("rms_norm", x=a([0, 0, 0], [1, 2, 3]), eps=0.0), expect=nan_rows([True, False])),
    Bad("rms_norm eps<0", call("rms_norm", x=a([1, 2]), eps=-1e-6), raises="eps"),
    Bad("rms_norm eps NaN", call("rms_norm", x=a([1, 2]), eps=float("nan")), raises="eps"),
    Bad("rms_norm inf row", call("rms_norm", x=a([1, np.inf], [1, 2])), expect=nan_rows([True, False])),
    Bad("rms_norm NaN row", call("rms_norm", x=X, eps=1e-6), expect=nan_rows([False, True])),
    Bad("rms_norm weight shape", call("rms_norm", x=a([1, 2, 3]), weight=np.array([1, 2], np.float32)), raises="weight"),
    Bad("rms_norm empty row", call("rms_norm", x=np.zeros((2, 0), np.float32)), raises="non-empty"),
    Bad("layer_norm constant row eps>0 = bias", call("layer_norm", x=a([3, 3, 3], [1, 2, 4]), bias=np.array([0.5, -1, 2], np.float32), eps=1e-5),
        expect=lambda y: np.array_equal(y[0], [0.5, -1, 2]) and np.isfinite(y).all()),
    Bad("layer_norm constant row eps=0", call("layer_norm", x=a([3, 3, 3], [1, 2, 4]), eps=0.0), expect=nan_rows([True, False])),
    Bad("layer_norm NaN row", call("layer_norm", x=X), expect=nan_rows([False, True])),
    Bad("layer_norm bias shape", call("layer_norm", x=a([1, 2, 3]), bias=np.array([1, 2], np.float32)), raises="bias"),
    Bad("rope odd n_dims", call("rope", x=Q, positions=P3, n_dims=3), raises="n_dims"),
    Bad("rope n_dims > head_dim", call("rope", x=Q, positions=P3, n_dims=10), raises="n_dims"),
    Bad("rope positions length", call("rope", x=Q, positions=np.arange(2)), raises="positions"),
    Bad("rope float positions", call("rope", x=Q, positions=np.arange(3.0)), raises="integer"),
    Bad("rope freq_factors short", call("rope", x=Q, positions=P3, freq_factors=np.ones(3, np.float32)), raises="freq_factors"),
    Bad("rope freq_factors zero", call("rope", x=Q, positions=P3, freq_factors=np.zeros(4, np.float32)), raises="freq_factors"),
    Bad("rope YaRN without n_ctx_orig", call("rope", x=Q, positions=P3, ext_factor=1.0), raises="yarn"),
    Bad("rope mode", call("rope", x=Q, positions=P3, mode="glm"), raises="mode"),
    Bad("rope freq_base 1", call("rope", x=Q, positions=P3, freq_base=1.0), raises="freq_base"),
    Bad("rope freq_scale 0", call("rope", x=Q, positions=P3, freq_scale=0.0), raises="freq_scale"),
    Bad("rope 2-D x", call("rope", x=Q[0], positions=np.arange(4)), raises="3-D"),
    Bad("rope NaN stays in its pair", call("rope", x=X_PAIR, positions=np.array([5])),
        expect=lambda y: np.isnan(y[0, 0, 2:4]).all() and np.isfinite(np.delete(y[0, 0], [2, 3])).all()),
    Bad("attention heads do not divide", call("attention", q=Q[:, :3], k=K, v=K, q_pos=P3, k_pos=P3), raises="divisible"),
    Bad("attention head dims differ", call("attention", q=Q[..., :4], k=K, v=K, q_pos=P3, k_pos=P3), raises="head dims"),
    Bad("attention v tokens", call("attention", q=Q, k=K, v=K[:2], q_pos=P3, k_pos=P3), raises="tokens and heads"),
    Bad("attention positions length", call("attention", q=Q, k=K, v=K, q_pos=P3[:2], k_pos=P3), raises="positions"),
    Bad("attention negative position", call("attention", q=Q, k=K, v=K, q_pos=P3 - 1, k_pos=P3), raises="positions"),
    Bad("attention query sees no key", call("attention", q=Q, k=K, v=K, q_pos=P3, k_pos=P3 + 5), raises="sees no key"),
    Bad("attention window < 0", call("attention", q=Q, k=K, v=K, q_pos=P3, k_pos=P3, window=-1), raises="window"),
    Bad("attention softcap < 0", call("attention", q=Q, k=K, v=K, q_pos=P3, k_pos=P3, softcap=-1.0), raises="softcap"),
    Bad("attention scale 0", call("attention", q=Q, k=K, v=K, q_pos=P3, k_pos=P3, scale=0.0), raises="scale"),
    Bad("attention NaN value reaches its column only", call("attention", q=Q, k=K, v=V_NAN, q_pos=P3, k_pos=P3), expect=_column_nan),
    Bad("attention NaN query row", call("attention", q=Q_NAN, k=K, v=K, q_pos=P3, k_pos=P3),
        expect=lambda y: np.isnan(y[0, 3]).all() and np.isnan(y).sum() == y.shape[2]),
    Bad("KV cache full", _cache_sequence((2, [0, 1]), (2, [2, 3])), raises="KV cache full"),
    Bad("KV cache repeated position", _cache_sequence((2, [0, 1]), (1, [1])), raises="already held"),
    Bad("KV cache wrong head count", _cache_sequence((1, [0]), heads=3), raises="match the cache"),
    Bad("KV cache positions count", _cache_sequence((2, [0])), raises="positions"),
    Bad("KV cache negative position", _cache_sequence((1, [-1])), raises="positions must be >= 0"),
    Bad("gelu limits", call("gelu", x=a([np.inf, -np.inf, np.nan, 0])),
        expect=lambda y: y[0, 0] == np.inf and y[0, 1] == 0 and np.isnan(y[0, 2]) and y[0, 3] == 0),
    Bad("gelu erf limits", call("gelu", x=a([np.inf, -np.inf]), approximate="none"), expect=lambda y: y[0, 0] == np.inf and y[0, 1] == 0),
    Bad("silu limits", call("silu", x=a([np.inf, -np.inf, np.nan])), expect=lambda y: y[0, 0] == np.inf and y[0, 1] == 0 and np.isnan(y[0, 2])),
    Bad("softcap limits", call("softcap", x=a([np.inf, -np.inf]), cap=30.0), expect=lambda y: y[0, 0] == 30 and y[0, 1] == -30),
    Bad("gelu approximate", call("gelu", x=a([1.0]), approximate="fast"), raises="approximate"),
    Bad("swiglu shapes", call("swiglu", gate=a([1, 2]), up=a([1, 2, 3])), raises="same shape"),
    Bad("softcap cap 0", call("softcap", x=a([1.0]), cap=0.0), raises="cap"),
    Bad("softcap cap inf", call("softcap", x=a([1.0]), cap=float("inf")), raises="cap"),
    Bad("matmul inner dims", call("matmul", a=a([1, 2]), b=a([1, 2])), raises="inner"),
    Bad("matmul 3-D", call("matmul", a=Q, b=a([1, 2])), raises="2-D"),
    Bad("embedding id too large", call("embedding", table=a([1, 2], [3, 4]), ids=np.array([2])), raises="outside the table"),
    Bad("embedding negative id", call("embedding", table=a([1, 2], [3, 4]), ids=np.array([-1])), raises="outside the table"),
    Bad("embedding float ids", call("embedding", table=a([1, 2], [3, 4]), ids=np.array([0.0])), raises="integer"),
    Bad("project_qkv weight rows", call("project_qkv", x=a([1, 2]), w_qkv=np.ones((5, 2), np.float32), n_head=2, n_kv_head=1, head_dim=1), raises="w_qkv"),
    Bad("project_qkv heads do not divide", call("project_qkv", x=a([1, 2]), w_qkv=np.ones((7, 2), np.float32), n_head=3, n_kv_head=2, head_dim=1), raises="divisible"),
    Bad("output_logits n_vocab too large", call("output_logits", hidden=a([1, 2]), w_out=np.ones((3, 2), np.float32), n_vocab=4), raises="exceeds"),
    Bad("output_logits n_vocab 0", call("output_logits", hidden=a([1, 2]), w_out=np.ones((3, 2), np.float32), n_vocab=0), raises="n_vocab"),
    Bad("argmax NaN row", call("argmax", x=X), raises="NaN"),
    Bad("argmax all -inf row", call("argmax", x=a([-np.inf, -np.inf])), raises="no finite"),
    Bad("argmax empty row", call("argmax", x=np.zeros((1, 0), np.float32)), raises="non-empty"),
    Bad("argmax first of ties", call("argmax", x=a([1, 3, 3], [2, 2, 2], dtype=F16)), expect=lambda y: y.tolist() == [1, 0]),
    Bad("argmax bf16 near-tie", call("argmax", x=a([1.0, 1.0078125], dtype=BF16)), expect=lambda y: y.tolist() == [1]),
]


# One clean call per function the bad inputs reach: an implementation that crashes on bad input
# is graded, not failed, under the default contract, but only if it answers clean input (else the
# "crash" says nothing about bad input, and an always-raising implementation would pass).
CLEAN: dict[str, Callable[[Any], Any]] = {
    "softmax": call("softmax", x=a([0.5, -1.0, 2.0, 0.0])),
    "log_softmax": call("log_softmax", x=a([0.5, -1.0, 2.0, 0.0])),
    "rms_norm": call("rms_norm", x=a([0.5, -1.0, 2.0, 0.0])),
    "layer_norm": call("layer_norm", x=a([0.5, -1.0, 2.0, 0.0])),
    "rope": call("rope", x=Q, positions=P3),
    "attention": call("attention", q=Q, k=K, v=K, q_pos=P3, k_pos=P3),
    "KV cache": _cache_sequence((2, [0, 1])),
    "gelu": call("gelu", x=a([0.5, -1.0])),
    "silu": call("silu", x=a([0.5, -1.0])),
    "softcap": call("softcap", x=a([0.5, -1.0]), cap=30.0),
    "swiglu": call("swiglu", gate=a([0.5, -1.0]), up=a([1.0, 2.0])),
    "matmul": call("matmul", a=a([1.0, 2.0]), b=a([1.0], [2.0])),
    "embedding": call("embedding", table=a([1.0, 2.0], [3.0, 4.0]), ids=np.array([1, 0])),
    "project_qkv": call("project_qkv", x=a([1.0] * 8), w_qkv=np.ones((16, 8), np.float32), n_head=2,
                        n_kv_head=1, head_dim=4),
    "output_logits": call("output_logits", hidden=a([1.0, 2.0]), w_out=a([1.0, 2.0], [3.0, 4.0], [5.0, 6.0]),
                          n_vocab=3),
    "argmax": call("argmax", x=a([0.5, -1.0, 2.0])),
}


def clean_call(bad: Bad) -> Callable[[Any], Any]:
    """The clean counterpart of ``bad``: the function its name starts with, on ordinary input."""
    return next(run for prefix, run in sorted(CLEAN.items(), key=lambda kv: -len(kv[0]))
                if bad.name.startswith(prefix))
