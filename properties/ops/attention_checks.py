"""Attention properties: the engine step against the oracle, decode == prefill at every prefix
length, causality, GQA == MHA with repeated K/V, and a permuted cache. Shared with the zoo."""
from __future__ import annotations

from typing import Any

import numpy as np

from oracle import ops as oracle_ops
from properties.backends import PASS_THROUGH
from properties.ops import models as m
from properties.ops.checks import call, compare, fail
from properties.ops.strategies import OpCase

ATTN_KEYS = ("scale", "causal", "window", "softcap")


def _attn(case: OpCase) -> dict[str, Any]:
    return {k: case.params[k] for k in ATTN_KEYS if k in case.params}


def append(oimpl, cache: Any, case: OpCase, k: np.ndarray, v: np.ndarray, pos: np.ndarray, prop: str) -> None:
    """cache.append with the arrays moved to the implementation's backend."""
    try:
        cache.append(oimpl.to_device(k), oimpl.to_device(v), oimpl.to_device(pos))
    except PASS_THROUGH:
        raise
    except Exception as exc:
        fail(prop, case, f"KVCache.append raised {type(exc).__name__}: {exc}")


def run_steps(oimpl, case: OpCase, rope: dict, splits: list[tuple[int, int]], prop: str) -> np.ndarray:
    """Feed the tokens to one fresh cache in the given [a, b) chunks; the stacked outputs."""
    a = case.arrays
    cache = call(oimpl, "KVCache", prop, case, n_kv_heads=a["k"].shape[1], head_dim=a["k"].shape[2],
                 capacity=a["k"].shape[0], v_dim=a["v"].shape[2])
    outs = [call(oimpl, "attention_step", prop, case, cache=cache, q=a["q"][s:e], k=a["k"][s:e], v=a["v"][s:e],
                 positions=a["k_pos"][s:e], rope=rope, **_attn(case)) for s, e in splits]
    return np.concatenate([np.asarray(o, dtype=np.float64) for o in outs])


def step_model(case: OpCase, rope: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(exact prefill output, scale, bound): attention's model on the exactly rotated q and k, with
    RoPE's own error model carried into the scores."""
    a = case.arrays
    pos = a["k_pos"]
    ff = {"freq_factors": rope["freq_factors"]} if "freq_factors" in rope else {}
    params = {k: v for k, v in rope.items() if k != "freq_factors"}
    rq = OpCase("rope", case.dtype, case.family, case.seed, {}, params, {"x": a["q"], "positions": pos, **ff})
    rk = OpCase("rope", case.dtype, case.family, case.seed, {}, params, {"x": a["k"], "positions": pos, **ff})
    q_rot, k_rot = oracle_ops.rope(**rq.kwargs), oracle_ops.rope(**rk.kwargs)
    dq, dk = (np.multiply(*m.rope_model(c, r)) for c, r in ((rq, q_rot), (rk, k_rot)))
    rotated = case.with_arrays(q=q_rot, k=k_rot)
    exact = oracle_ops.attention(**rotated.kwargs)
    scale, bound = m.attention_model(rotated, exact, dq, dk)
    return exact, scale, bound


def check_step_matches_oracle(oimpl, case: OpCase, rope: dict):
    """One prefill step through the implementation's cache equals the oracle's RoPE + attention."""
    prop = "attention_step (prefill) ≡ oracle"
    out = run_steps(oimpl, case, rope, [(0, case.arrays["q"].shape[0])], prop)
    exact, scale, bound = step_model(case, rope)
    return compare(prop, case, out, exact, scale, bound)


def check_decode_equals_prefill(oimpl, case: OpCase, rope: dict) -> None:
    """For every prefix length m: prefill m tokens, decode the rest one by one — the outputs equal
    one full prefill (within twice the model: both are within it of the same exact values)."""
    n = case.arrays["q"].shape[0]
    full = run_steps(oimpl, case, rope, [(0, n)], "decode == prefill")
    _, scale, bound = step_model(case, rope)
    for pre in range(n):
        splits = ([(0, pre)] if pre else []) + [(t, t + 1) for t in range(pre, n)]
        out = run_steps(oimpl, case, rope, splits, "decode == prefill")
        compare(f"decode after a {pre}-token prefill == full prefill", case, out, full, scale, bound, 2.0)


def check_causality(oimpl, case: OpCase, cutoff: int, poison: str) -> None:
    """Replacing every key/value at a position > cutoff (by other values, or NaN/inf) leaves the
    outputs of queries at positions <= cutoff bit-identical."""
    a = case.arrays
    future = a["k_pos"] > cutoff
    rng = np.random.default_rng(case.seed + 7)
    k2, v2 = a["k"].copy(), a["v"].copy()
    fresh = {"random": lambda s: rng.normal(0, 3, s), "nan": lambda s: np.full(s, np.nan),
             "inf": lambda s: np.full(s, np.inf)}[poison]
    k2[future] = fresh(k2[future].shape).astype(k2.dtype)
    v2[future] = fresh(v2[future].shape).astype(v2.dtype)
    before = np.asarray(call(oimpl, "attention", "causality", case, **case.kwargs))
    after = np.asarray(call(oimpl, "attention", "causality", case, **case.with_arrays(k=k2, v=v2).kwargs))
    past = a["q_pos"] <= cutoff
    same = np.array([np.array_equal(b, c, equal_nan=True) for b, c in zip(before, after)])
    if not same[past].all():
        t = int(np.flatnonzero(past & ~same)[0])
        fail(f"causality ({poison} future keys/values)", case,
             f"query {t} at position {int(a['q_pos'][t])} changed when keys after position {cutoff} changed")


def check_gqa_equals_mha(oimpl, case: OpCase):
    """GQA equals MHA on K/V heads repeated group-wise (query head h reads K/V head h // group)."""
    a = case.arrays
    g = a["q"].shape[1] // a["k"].shape[1]
    gqa = call(oimpl, "attention", "GQA == MHA", case, **case.kwargs)
    rep = case.with_arrays(k=np.repeat(a["k"], g, axis=1), v=np.repeat(a["v"], g, axis=1))
    mha = call(oimpl, "attention", "GQA == MHA", case, **rep.kwargs)
    scale, bound = m.attention_model(case, oracle_ops.attention(**case.kwargs))
    return compare(f"GQA (group {g}) == MHA with repeated K/V", case, gqa, mha, scale, bound, 2.0)


def check_permuted_cache(oimpl, case: OpCase, perm: np.ndarray, chunks: int):
    """A cache filled in another order (with each entry's position) gives the same attention."""
    a = case.arrays
    outs = []
    for order in (np.arange(perm.size), perm):
        cache = call(oimpl, "KVCache", "permuted cache", case, n_kv_heads=a["k"].shape[1],
                     head_dim=a["k"].shape[2], capacity=perm.size, v_dim=a["v"].shape[2])
        for part in np.array_split(order, chunks):
            if part.size:
                append(oimpl, cache, case, a["k"][part], a["v"][part], a["k_pos"][part], "permuted cache")
        outs.append(call(oimpl, "attention_decode", "permuted cache", case, cache=cache, q=a["q"],
                         q_pos=a["q_pos"], **_attn(case)))
    scale, bound = m.attention_model(case, oracle_ops.attention(**case.kwargs))
    return compare("permuted KV cache with permuted positions", case, outs[1], outs[0], scale, bound, 2.0)
