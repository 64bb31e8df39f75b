"""Engine-variant bugs, one per coverage gap of the engine functions: each is gpu_impl with one
function of ``gpu_impl.engines`` (or ``rejection_sample``) replaced, written fresh as the bug an
engine port makes. ``MUTANTS`` are the zoo's; ``properties/zoo/test_engine_variant_mutants.py``
hunts each with the engine room's properties and replays the kill on gpu_impl.

Where a bug shows only at an argument the old tests never sent (a history, a penalty, t != 1, a
window), at an exact boundary, in a chain, in the law over seeds or at q(d) = 0, it is named so.
``softmax_free`` mutants also lack the top-level ``softmax``: a test that needed it to judge an
engine filter could only call them NOT COVERED.
"""
from __future__ import annotations

from dataclasses import dataclass
from types import ModuleType
from typing import Any, Callable

import numpy as np

import gpu_impl
import gpu_impl.engines as base
from gpu_impl.engines import seeded
from properties.zoo.runner import Mutant, replaced, swapped
from properties.zoo.runner import host as _host

Build = Callable[[ModuleType], Callable[..., Any]]
"""gpu_impl.engines (or gpu_impl, for ``rejection_sample``) -> the replacing function."""


def _rows(v: Any, b: int, dtype=np.float64) -> np.ndarray:
    return np.broadcast_to(np.asarray(_host(v), dtype=dtype).reshape(-1), (b,)) if np.ndim(_host(v)) else np.full(b, _host(v), dtype)


# --- candle -------------------------------------------------------------------------------

def candle_penalty_ignores_window(e: ModuleType) -> Callable[..., Any]:
    """candle's repeat_last_n dropped: the whole history is penalised."""
    def candle_repeat_penalty(logits, history, penalty, last_n):
        return e.candle_repeat_penalty(logits, history, penalty, np.full(np.shape(_host(logits))[0], 1 << 30))
    return candle_repeat_penalty


def candle_penalty_divides_negative(e: ModuleType) -> Callable[..., Any]:
    """l / r for every seen token, negative logits too (the sign test lost)."""
    def candle_repeat_penalty(logits, history, penalty, last_n):
        x = _host(logits).astype(np.float32)
        out = _host(e.candle_repeat_penalty(x, history, penalty, last_n))
        r = _rows(penalty, x.shape[0], np.float32)[:, None]
        return np.where((out != x) & (x < 0), x / r, out)
    return candle_repeat_penalty


# --- mistral.rs ---------------------------------------------------------------------------

def mistralrs_frequency_ignored(e: ModuleType) -> Callable[..., Any]:
    """The frequency penalty never reaches the logits."""
    def mistralrs_weights(logits, history, repetition, frequency, presence, t, top_k, top_p, min_p):
        return e.mistralrs_weights(logits, history, repetition, 0.0, presence, t, top_k, top_p, min_p)
    return mistralrs_weights


def mistralrs_truncates_before_temperature(e: ModuleType) -> Callable[..., Any]:
    """top_k / top_p / min_p decided on softmax(l), the weights then taken at softmax(l / t)."""
    def mistralrs_weights(logits, history, repetition, frequency, presence, t, top_k, top_p, min_p):
        tt = _rows(t, np.shape(_host(logits))[0])
        cut = _host(e.mistralrs_weights(logits, history, repetition, frequency, presence, np.where(tt > 0, 1.0, tt),
                                        top_k, top_p, min_p))
        full = _host(e.mistralrs_weights(logits, history, repetition, frequency, presence, t, 0, 1.0, 0.0))
        return np.where(cut > 0, full, np.float32(0))
    return mistralrs_weights


def mistralrs_top_p_strict(e: ModuleType) -> Callable[..., Any]:
    """top_p zeroes from the first token whose running mass before it exceeds p (> instead of >=):
    one token too many when the mass hits p exactly."""
    def mistralrs_weights(logits, history, repetition, frequency, presence, t, top_k, top_p, min_p):
        w = _host(e.mistralrs_weights(logits, history, repetition, frequency, presence, t, top_k, top_p, min_p))
        full = _host(e.mistralrs_weights(logits, history, repetition, frequency, presence, t, top_k, 1.0, min_p))
        p = _rows(top_p, w.shape[0])
        out = w.copy()
        for b in range(w.shape[0]):
            if not 0 < p[b] < 1:
                continue
            order = np.argsort(-full[b], kind="stable")
            before = np.cumsum(full[b][order], dtype=np.float32) - full[b][order]
            hit = np.flatnonzero((before == np.float32(p[b])) & (full[b][order] > 0))
            if hit.size:
                out[b, order[hit[0]]] = full[b, order[hit[0]]]
        return out
    return mistralrs_weights


# --- transformers and vLLM filters and chains ---------------------------------------------

def hf_top_k_exactly_k(e: ModuleType) -> Callable[..., Any]:
    """top_k keeps exactly max(k, min_keep) tokens (lowest id among ties at the k-th value)."""
    def hf_top_k(logits, k, min_keep=1):
        x = _host(logits).astype(np.float32)
        out = _host(e.hf_top_k(x, k, min_keep)).copy()
        kk = np.maximum(_rows(k, x.shape[0], np.int64), _rows(min_keep, x.shape[0], np.int64))
        for b in range(x.shape[0]):
            order = np.argsort(-np.where(np.isfinite(out[b]), out[b], -np.inf), kind="stable")
            out[b, order[kk[b]:]] = -np.inf
        return out
    return hf_top_k


def hf_min_p_strict_softmax_free(e: ModuleType) -> Callable[..., Any]:
    """min_p drops p_i <= min_p·p_max (equality removed; min_keep restores the largest)."""
    def hf_min_p(logits, p, min_keep=1):
        x = _host(logits).astype(np.float32)
        out = _host(e.hf_min_p(x, p, min_keep)).copy()
        pp = _rows(p, x.shape[0], np.float32)
        mk = _rows(min_keep, x.shape[0], np.int64)
        for b in range(x.shape[0]):
            if pp[b] <= 0:
                continue
            z = np.exp(x[b] - x[b].max(), dtype=np.float32)
            pr = z / z.sum(dtype=np.float32)
            order = np.argsort(-x[b], kind="stable")
            drop = pr <= pr.max() * pp[b]
            drop[order[:max(int(mk[b]), 1)]] = False
            out[b, drop] = -np.inf
        return out
    return hf_min_p


def hf_chain_top_p_before_top_k(e: ModuleType) -> Callable[..., Any]:
    """generate's warpers with top_p run before top_k."""
    def hf_chain(logits, history, repetition_penalty, t, top_k, top_p, min_p, typical=1.0, epsilon=0.0, eta=0.0,
                 min_keep=1):
        x = _host(logits).astype(np.float32)
        B = x.shape[0]
        rep, tt, pp, mm = (_rows(v, B) for v in (repetition_penalty, t, top_p, min_p))
        kk, mk = _rows(top_k, B, np.int64), _rows(min_keep, B, np.int64)
        out = _host(e.hf_chain(x, history, rep, tt, np.zeros(B, np.int64), np.ones(B), np.zeros(B), 1.0, 0.0, 0.0, mk))
        for b in range(B):
            r = out[b:b + 1]
            if pp[b] < 1:
                r = _host(e.hf_top_p(r, pp[b:b + 1], mk[b:b + 1]))
            if kk[b] > 0:
                r = _host(e.hf_top_k(r, kk[b:b + 1], mk[b:b + 1]))
            out[b] = r[0]
        return _host(e.hf_chain(out, np.full((B, 1), -1), np.ones(B), np.ones(B), np.zeros(B, np.int64), np.ones(B), mm,
                                typical, epsilon, eta, mk))
    return hf_chain


def vllm_chain_min_p_last(e: ModuleType) -> Callable[..., Any]:
    """vLLM's min_p applied after top_k / top_p instead of before them."""
    def vllm_chain(logits, prompt, output, repetition, frequency, presence, t, min_p, top_k, top_p):
        x = _host(logits).astype(np.float32)
        B = x.shape[0]
        tt = _rows(t, B)
        right = _host(e.vllm_chain(x, prompt, output, repetition, frequency, presence, t, min_p, top_k, top_p))
        y = _host(e.vllm_chain(x, prompt, output, repetition, frequency, presence, t, np.zeros(B), top_k, top_p))
        y = _host(e.vllm_min_p(y, min_p))
        return np.where((tt < 1e-5)[:, None], right, y)
    return vllm_chain


def vllm_chain_penalties_after_temperature(e: ModuleType) -> Callable[..., Any]:
    """Penalties applied to l / t instead of l (the subtraction no longer scales with 1/t)."""
    def vllm_chain(logits, prompt, output, repetition, frequency, presence, t, min_p, top_k, top_p):
        x = _host(logits).astype(np.float32)
        B = x.shape[0]
        tt = _rows(t, B)
        scaled = np.where((tt >= 1e-5)[:, None], x / np.where(tt >= 1e-5, tt, 1.0).astype(np.float32)[:, None], x)
        return _host(e.vllm_chain(scaled.astype(np.float32), prompt, output, repetition, frequency, presence,
                                  np.where(tt >= 1e-5, 1.0, tt), min_p, top_k, top_p))
    return vllm_chain


def engines_softmax_top_1000(e: ModuleType) -> Callable[..., Any]:
    """The engine module's softmax normalised by the sum over the 1,000 largest terms only."""
    def softmax(logits):
        x = _host(logits).astype(np.float32)
        with np.errstate(invalid="ignore", over="ignore"):
            z = np.exp(x - x.max(axis=1, keepdims=True), dtype=np.float32)
        top = -np.sort(-z, axis=1)[:, :1000]
        return z / top.sum(axis=1, keepdims=True, dtype=np.float32)
    return softmax


# --- seeds and drafts ----------------------------------------------------------------------

def seeded_race_uniform_noise(e: ModuleType) -> Callable[..., Any]:
    """The race divides by the uniform itself (argmax p / u) instead of an Exp(1) draw."""
    def vllm_sample_seeded(logits, seeds, step=0, batch_seed=-1):
        x = _host(logits).astype(np.float32)
        u = seeded.row_uniforms(_host(seeds), x.shape[1], int(_host(step)), int(_host(batch_seed)))
        # -log(1 - u') = u  <=>  u' = 1 - exp(-u): the race then divides by u
        return e.vllm_sample(x, 1.0 - np.exp(-u))
    return vllm_sample_seeded


def seeded_stream_ignores_step(e: ModuleType) -> Callable[..., Any]:
    """Every decode step re-reads block 0 of the seed's stream: the same token at every step."""
    def vllm_sample_seeded(logits, seeds, step=0, batch_seed=-1):
        return e.vllm_sample_seeded(logits, seeds, 0, batch_seed)
    return vllm_sample_seeded


def rejection_zero_q_as_one(g: ModuleType) -> Callable[..., Any]:
    """q(d) = 0 guarded as q(d) = 1 (a division-by-zero guard): a·1 < p rejects for a >= p."""
    def rejection_sample(target_probs, draft_probs, draft_tokens, accept_u, residual_u, top_k=0, top_p=1.0):
        q = np.array(_host(draft_probs), dtype=np.float32)
        d = _host(draft_tokens).astype(np.int64)
        bi, ki = np.meshgrid(np.arange(q.shape[0]), np.arange(q.shape[1]), indexing="ij")
        q[bi, ki, d] = np.where(q[bi, ki, d] == 0, np.float32(1), q[bi, ki, d])
        return g.rejection_sample(target_probs, q, draft_tokens, accept_u, residual_u, top_k, top_p)
    return rejection_sample


@dataclass(frozen=True)
class EngineBug:
    name: str
    description: str
    function: str
    """The replaced function (``engines.``-qualified for the engines module)."""
    build: Build
    softmax_free: bool = False


BUGS = (
    EngineBug("candle_penalty_ignores_window", "candle's repeat penalty ignores repeat_last_n (whole history)",
              "engines.candle_repeat_penalty", candle_penalty_ignores_window),
    EngineBug("candle_penalty_divides_negative", "candle's repeat penalty divides negative logits by r",
              "engines.candle_repeat_penalty", candle_penalty_divides_negative),
    EngineBug("mistralrs_frequency_ignored", "mistral.rs drops the frequency penalty",
              "engines.mistralrs_weights", mistralrs_frequency_ignored),
    EngineBug("mistralrs_truncates_before_temperature", "mistral.rs truncates on softmax(l), not softmax(l / t)",
              "engines.mistralrs_weights", mistralrs_truncates_before_temperature),
    EngineBug("mistralrs_top_p_strict", "mistral.rs top_p cuts at mass > p instead of >= p",
              "engines.mistralrs_weights", mistralrs_top_p_strict),
    EngineBug("hf_top_k_exactly_k", "transformers top_k keeps exactly k tokens, dropping ties at the k-th",
              "engines.hf_top_k", hf_top_k_exactly_k),
    EngineBug("hf_min_p_strict_softmax_free", "transformers min_p removes p = min_p·p_max; the module has no "
              "top-level softmax", "engines.hf_min_p", hf_min_p_strict_softmax_free, softmax_free=True),
    EngineBug("hf_chain_top_p_before_top_k", "transformers' chain runs top_p before top_k",
              "engines.hf_chain", hf_chain_top_p_before_top_k),
    EngineBug("vllm_chain_min_p_last", "vLLM's chain applies min_p after top_k / top_p",
              "engines.vllm_chain", vllm_chain_min_p_last),
    EngineBug("vllm_chain_penalties_after_temperature", "vLLM's chain penalises l / t",
              "engines.vllm_chain", vllm_chain_penalties_after_temperature),
    EngineBug("engines_softmax_top_1000", "the engine module's softmax sums the 1,000 largest terms only",
              "engines.softmax", engines_softmax_top_1000),
    EngineBug("seeded_race_uniform_noise", "the seeded race divides by u, not by an Exp(1) draw",
              "engines.vllm_sample_seeded", seeded_race_uniform_noise),
    EngineBug("seeded_stream_ignores_step", "a seed's stream restarts at every decode step",
              "engines.vllm_sample_seeded", seeded_stream_ignores_step),
    EngineBug("rejection_zero_q_as_one", "rejection_sample reads q(d) = 0 as 1 in the acceptance test",
              "rejection_sample", rejection_zero_q_as_one),
)


def mutant_module(bug: EngineBug) -> ModuleType:
    """gpu_impl with the bug: a new top-level module whose ``engines`` attribute is the engines
    module with the function replaced (``properties.backends.part_of`` reads it)."""
    fn = bug.function.split(".")[-1]
    engines = swapped(base, bug.name, **({fn: bug.build(base)} if bug.function.startswith("engines.") else {}))
    top = swapped(gpu_impl, bug.name, **({} if bug.function.startswith("engines.") else {fn: bug.build(gpu_impl)}))
    if bug.softmax_free:
        del top.__dict__["softmax"]
        del engines.__dict__["softmax"]
    top.engines = engines
    return top


MUTANTS = tuple(Mutant(b.name, b.description, frozenset({b.function.split(".")[-1]}),
                       replaced(lambda _base, b=b: mutant_module(b))) for b in BUGS)
