"""Hypothesis strategies for the ops: hypothesis draws the recipe (dtype, family, sizes, seed,
scalar parameters); ``OpCase`` builds the arrays from it with NumPy. The repr of a case is that
recipe, so a failure prints a replayable ``OpCase(...)`` and shrinking moves towards small
sizes, simple families and seed 0."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from hypothesis import strategies as st

from properties.ops.fill import families_for, fill, ids
from properties.samplers.strategies import BLOCK_EDGES, DTYPES

ROW_LENGTHS = tuple(sorted({1, 2, 3, 5, 8, 17, 100, 1000, *BLOCK_EDGES}))
KEY_EDGES = (63, 64, 65, 127, 128, 129, 200, 255, 256, 257)
"""Attention lengths past one and two flash tiles (16, 64 or 128 keys wide), with partial last tiles."""
HEAD_DIMS = (2, 4, 8, 16, 32, 64, 128)
SEEDS = st.integers(0, 2**16)

Builder = Callable[[np.random.Generator, "OpCase"], dict[str, np.ndarray]]
BUILDERS: dict[str, Builder] = {}


@dataclass
class OpCase:
    op: str
    dtype: str
    family: str
    seed: int
    shape: dict[str, int]
    params: dict[str, Any] = field(default_factory=dict)
    arrays: dict[str, np.ndarray] = field(default=None, repr=False)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.arrays is None:
            self.arrays = BUILDERS[self.op](np.random.default_rng(self.seed), self)

    @property
    def kwargs(self) -> dict[str, Any]:
        return {**self.arrays, **self.params}

    def with_arrays(self, **arrays: np.ndarray) -> "OpCase":
        return OpCase(self.op, self.dtype, self.family, self.seed, self.shape, self.params, {**self.arrays, **arrays})

    def with_params(self, **params: Any) -> "OpCase":
        return OpCase(self.op, self.dtype, self.family, self.seed, self.shape, {**self.params, **params}, self.arrays)


def builder(*ops: str):
    def register(fn: Builder) -> Builder:
        for op in ops:
            BUILDERS[op] = fn
        return fn
    return register


@builder("softmax", "log_softmax", "argmax", "softcap", "gelu", "silu")
def _rows(rng, c: OpCase) -> dict[str, np.ndarray]:
    x = fill(rng, c.family, (c.shape["rows"], c.shape["n"]), c.dtype)
    out = {"x": x.T.copy() if c.params.get("axis", -1) == 0 else x}
    if c.shape.get("mask"):  # additive mask: a causal-style -inf pattern plus a finite bias
        m = np.where(rng.random(x.shape) < 0.3, -np.inf, rng.normal(0, 2, x.shape))
        m[:, 0] = 0.0  # keep one entry per row unmasked
        out["mask"] = (m.T.copy() if c.params.get("axis", -1) == 0 else m).astype(np.float32)
    return out


@builder("swiglu", "geglu")
def _gated(rng, c: OpCase) -> dict[str, np.ndarray]:
    shape = (c.shape["rows"], c.shape["n"])
    return {"gate": fill(rng, c.family, shape, c.dtype), "up": fill(rng, "normal", shape, c.dtype)}


@builder("rms_norm", "layer_norm")
def _norm(rng, c: OpCase) -> dict[str, np.ndarray]:
    n = c.shape["n"]
    out = {"x": fill(rng, c.family, (c.shape["rows"], n), c.dtype)}
    w = c.shape.get("weight", 0)
    if w:  # 1: weights near 1 (Llama), 2: weights near 0 (Gemma's 1 + w)
        base = 1.0 if w == 1 else 0.0
        out["weight"] = (base + 0.3 * rng.normal(0, 1, n)).astype(np.float32).astype(out["x"].dtype)
        if c.op == "layer_norm":
            out["bias"] = (0.1 * rng.normal(0, 1, n)).astype(np.float32).astype(out["x"].dtype)
    return out


@builder("rope")
def _rope(rng, c: OpCase) -> dict[str, np.ndarray]:
    s = c.shape
    x = fill(rng, c.family, (s["tokens"], s["heads"], s["head_dim"]), c.dtype)
    pos = s["start"] + (np.arange(s["tokens"]) if s["spread"] == 0 else np.sort(rng.integers(0, s["spread"], s["tokens"])))
    out = {"x": x, "positions": pos.astype(np.int32)}
    if s["factors"]:  # 1: llama3-like smooth factors, 2: partial rotary (1e30 leaves pairs unrotated)
        half = (c.params.get("n_dims") or s["head_dim"]) // 2
        ff = np.linspace(1.0, 8.0, half) if s["factors"] == 1 else np.where(np.arange(half) >= half // 2, 1e30, 1.0)
        out["freq_factors"] = ff.astype(np.float32)
    return out


@builder("attention")
def _attention(rng, c: OpCase) -> dict[str, np.ndarray]:
    s = c.shape
    hkv, hq, d, dv = s["kv_heads"], s["kv_heads"] * s["group"], s["head_dim"], s["v_dim"]
    tq, tk = s["queries"], s["keys"]
    mag = s["mag"] / 4.0
    k_pos = s["start"] + np.arange(tk)
    q_pos = k_pos[-tq:] if tq <= tk else s["start"] + np.arange(tq)
    if s["shuffle"]:  # the cache order is not the position order
        k_perm = rng.permutation(tk)
        k_pos = k_pos[k_perm]
    # mag is a power of two, so scaling the stored values stays exact
    return {"q": (fill(rng, "normal", (tq, hq, d), c.dtype).astype(np.float32) * mag).astype(DTYPES[c.dtype]),
            "k": (fill(rng, "normal", (tk, hkv, d), c.dtype).astype(np.float32) * mag).astype(DTYPES[c.dtype]),
            "v": fill(rng, c.family, (tk, hkv, dv), c.dtype),
            "q_pos": q_pos.astype(np.int32), "k_pos": k_pos.astype(np.int32)}


@builder("matmul")
def _matmul(rng, c: OpCase) -> dict[str, np.ndarray]:
    m, k, n = c.shape["m"], c.shape["k"], c.shape["n"]
    return {"a": fill(rng, c.family, (m, k), c.dtype), "b": fill(rng, "normal", (k, n), c.dtype)}


@builder("output_logits")
def _logits(rng, c: OpCase) -> dict[str, np.ndarray]:
    s = c.shape
    w = fill(rng, "normal", (s["vocab"] + s["pad"], s["d"]), c.dtype)
    return {"hidden": fill(rng, c.family, (s["tokens"], s["d"]), c.dtype), "w_out": w}


@builder("project_qkv")
def _qkv(rng, c: OpCase) -> dict[str, np.ndarray]:
    p = c.params
    rows = (p["n_head"] + 2 * p["n_kv_head"]) * p["head_dim"]
    return {"x": fill(rng, c.family, (c.shape["tokens"], c.shape["d_model"]), c.dtype),
            "w_qkv": fill(rng, "normal", (rows, c.shape["d_model"]), c.dtype)}


@builder("embedding")
def _embedding(rng, c: OpCase) -> dict[str, np.ndarray]:
    table = fill(rng, c.family, (c.shape["vocab"], c.shape["d"]), c.dtype)
    return {"table": table, "ids": ids(rng, c.shape["vocab"], (c.shape["tokens"],))}


def _family(draw, dtype: str, families: tuple[str, ...]) -> str:
    return draw(st.sampled_from(families_for(dtype, families)), label="family")


def _n(draw, lengths=ROW_LENGTHS) -> int:
    return draw(st.sampled_from(lengths), label="n")


@st.composite
def row_cases(draw, op: str, dtype: str, families: tuple[str, ...], params: st.SearchStrategy[dict] = st.just({}),
              masks: bool = False, axes: bool = False, force_mask: bool = False) -> OpCase:
    p = dict(draw(params, label="params"))
    if axes:
        p["axis"] = draw(st.sampled_from([-1, 0]), label="axis")
    shape = {"rows": draw(st.integers(1, 4), label="rows"), "n": _n(draw)}
    if force_mask:
        shape["mask"] = 1
    elif masks:
        shape["mask"] = int(draw(st.booleans(), label="mask"))
    BUILDERS.setdefault(op, _rows)  # a new row-wise op needs no builder of its own
    return OpCase(op, dtype, _family(draw, dtype, families), draw(SEEDS, label="seed"), shape, p)


@st.composite
def norm_cases(draw, op: str, dtype: str) -> OpCase:
    fams = ("normal", "scaled", "wide", "outlier", "offset", "tiny", "ties", "huge", "near_max")
    eps = draw(st.sampled_from([1e-6, 1e-5, 1e-12, 0.0, 0.1]), label="eps")
    p: dict[str, Any] = {"eps": eps}
    weight = draw(st.sampled_from([0, 1, 2]), label="weight")
    if op == "rms_norm":
        p["unit_offset"] = weight == 2
    shape = {"rows": draw(st.integers(1, 4), label="rows"), "n": _n(draw), "weight": weight}
    return OpCase(op, dtype, _family(draw, dtype, fams), draw(SEEDS, label="seed"), shape, p)


@st.composite
def rope_cases(draw, dtype: str, yarn: bool | None = None) -> OpCase:
    head_dim = draw(st.sampled_from(HEAD_DIMS), label="head_dim")
    partial = draw(st.booleans(), label="partial")
    n_dims = 2 * draw(st.integers(1, head_dim // 2), label="n_dims/2") if partial else head_dim
    p: dict[str, Any] = {"n_dims": n_dims, "mode": draw(st.sampled_from(["normal", "neox"]), label="mode"),
                         "freq_base": draw(st.sampled_from([10000.0, 500000.0, 1e6, 160000.0, 100.0]), label="base"),
                         "freq_scale": draw(st.sampled_from([1.0, 0.5, 0.25, 0.125, 1 / 40]), label="freq_scale"),
                         "attn_factor": draw(st.sampled_from([1.0, 1.0, 0.5, 1.25]), label="attn_factor")}
    use_yarn = draw(st.booleans(), label="yarn") if yarn is None else yarn
    if use_yarn:
        p.update(ext_factor=draw(st.sampled_from([1.0, 0.5]), label="ext_factor"),
                 beta_fast=draw(st.sampled_from([32.0, 16.0]), label="beta_fast"),
                 beta_slow=draw(st.sampled_from([1.0, 2.0]), label="beta_slow"),
                 n_ctx_orig=draw(st.sampled_from([2048, 4096, 8192, 32768]), label="n_ctx_orig"))
    shape = {"tokens": draw(st.integers(1, 6), label="tokens"), "heads": draw(st.integers(1, 3), label="heads"),
             "head_dim": head_dim, "start": draw(st.sampled_from([0, 1, 7, 100, 4095, 32767, 131071]), label="start"),
             "spread": draw(st.sampled_from([0, 0, 50, 100000]), label="spread"),
             "factors": draw(st.sampled_from([0, 0, 1, 2]), label="factors")}
    return OpCase("rope", dtype, _family(draw, dtype, ("normal", "wide", "scaled")), draw(SEEDS, label="seed"), shape, p)


@st.composite
def attention_cases(draw, dtype: str, *, prefill: bool = False, shuffle: bool | None = None,
                    max_keys: int = 12, long: bool = True) -> OpCase:
    keys = draw(st.one_of(st.integers(1, max_keys), st.sampled_from(KEY_EDGES)) if long else
                st.integers(1, max_keys), label="keys")
    # past max_keys: a few queries (decode and short chunks) over a long cache
    queries = keys if prefill else draw(st.integers(1, min(keys, 4) if keys > max_keys else keys), label="queries")
    d = draw(st.sampled_from(HEAD_DIMS), label="head_dim")
    shape = {"keys": keys, "queries": queries, "head_dim": d,
             "v_dim": draw(st.sampled_from([d, max(1, d // 2)]), label="v_dim"),
             "kv_heads": draw(st.sampled_from([1, 2, 4]), label="kv_heads"),
             "group": draw(st.sampled_from([1, 2, 4]), label="group"),
             "start": draw(st.sampled_from([0, 0, 5, 1000]), label="start"),
             "mag": draw(st.sampled_from([1, 4, 8]), label="mag×4"),
             "shuffle": int(draw(st.booleans(), label="shuffle") if shuffle is None else shuffle)}
    p = {"causal": True, "window": draw(st.sampled_from([0, 0, 1, 2, 4]), label="window"),
         "softcap": draw(st.sampled_from([0.0, 0.0, 50.0, 30.0, 5.0]), label="softcap"),
         "scale": draw(st.sampled_from([None, None, 1.0, 0.125]), label="scale")}
    family = _family(draw, dtype, ("normal", "wide", "ties"))
    return OpCase("attention", dtype, family, draw(SEEDS, label="seed"), shape, p)


@st.composite
def step_cases(draw, dtype: str) -> tuple[OpCase, dict[str, Any]]:
    """A prefill-shaped attention case (positions in order) plus the RoPE parameters an engine
    step applies to q and k before appending k/v to its cache."""
    case = draw(attention_cases(dtype, prefill=True, shuffle=False, max_keys=8, long=False), label="attention")
    rc = draw(rope_cases(dtype), label="rope")
    rope = dict(rc.params)
    d = case.shape["head_dim"]
    rope["n_dims"] = min(rope["n_dims"], d) // 2 * 2 or 2
    if "freq_factors" in rc.arrays:
        half = rope["n_dims"] // 2
        rope["freq_factors"] = np.resize(rc.arrays["freq_factors"], half)
    return case, rope
