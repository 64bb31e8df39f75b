"""Token logprobs on fixed-shape [B, V] float32 rows (-inf = masked or dropped by a chain).

The row given is the row whose log-softmax is reported: the raw logits for raw logprobs (vLLM's
default, llama-server without post-sampling probabilities), a chain's output for processed ones
(vLLM ``processed_logprobs``, llama-server's post-sampling probabilities, transformers'
``compute_transition_scores`` with ``normalize_logits``).

lp_i = (l_i - max) - ln s, s = Σ exp(l_j - max) taken as k + rest (k tokens at the max), so
ln s = ln k + log1p(rest / k) keeps a tail below float32's resolution: a token whose p is within
u of 1 gets a tiny negative logprob, and 0.0 exactly only where it is the row's only finite
token. Masked tokens get -inf exactly.

``logprobs_top_n``: the first n tokens in (logit descending, id ascending) order with their
logprobs; masked ids (ascending, logprob -inf) only fill the places a row with fewer than n
finite tokens leaves: every id valid and distinct. A row with no finite logit has no
distribution: ValueError.
"""
from __future__ import annotations

from typing import Any

from gpu_impl._array import as_logits, quiet, require_candidates
from gpu_impl.softmax import log_normaliser


def _log_softmax(logits: Any, fn: str) -> tuple[Any, Any]:
    xp, x, row_max = as_logits(logits)
    require_candidates(xp, row_max, fn)
    _, _, log_s = log_normaliser(xp, x, row_max)
    with quiet():
        lp = (x - row_max[:, None]) - log_s[:, None]
    return xp, lp


def logprobs_top_n(logits: Any, n: Any) -> tuple[Any, Any]:
    """``(ids int64 [B, n], logprobs float32 [B, n])``: the n most probable tokens of each row,
    sorted descending, lower id first among ties; 0 <= n <= V."""
    xp, x, _ = as_logits(logits)
    V = x.shape[1]
    nn = int(n)
    if nn != n or not 0 <= nn <= V:
        raise ValueError(f"n must be an integer in [0, V = {V}], got {n!r}")
    _, lp = _log_softmax(x, "logprobs_top_n")
    with quiet():
        order = xp.argsort(-x, axis=1, kind="stable")  # -(-inf) = +inf: masked last, ids ascending
    ids = order[:, :nn].astype(xp.int64)
    return ids, xp.take_along_axis(lp, ids, axis=1).astype(xp.float32)


def logprobs_of(logits: Any, ids: Any) -> Any:
    """float32 [B]: the logprob of token ``ids[b]`` under row b's log-softmax (-inf if masked)."""
    xp, x, _ = as_logits(logits)
    B, V = x.shape
    t = xp.asarray(ids)
    if t.shape != (B,) or not (t.dtype.kind in "iu"):
        raise ValueError(f"ids must be integers of shape ({B},), got {t.dtype} {tuple(t.shape)}")
    if bool(((t < 0) | (t >= V)).any()):
        raise ValueError(f"ids must be in [0, {V}), got {t.tolist()}")
    _, lp = _log_softmax(x, "logprobs_of")
    return xp.take_along_axis(lp, t.astype(xp.int64)[:, None], axis=1)[:, 0].astype(xp.float32)
