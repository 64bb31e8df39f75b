"""Token logprobs as engines expose them, float64.

``logprobs(logits, mode, ...)`` on one row of V logits (-inf = masked):

- ``"raw"``: log-softmax of the raw logits, -inf exactly for masked tokens;
- ``"processed"``: log-softmax of the row after the engine's chain (``processed=``: the chain's
  output, -inf for every token it dropped, the survivors' values as the chain left them, e.g.
  divided by the temperature);
- ``"sampled"``: the chosen token's (``token=``) logprob under ``space=`` "raw" or "processed";
- ``"top_n"``: ``(ids, logprobs)`` of the ``n`` most probable tokens of ``space``'s row.

Top-n convention (one rule, no special case): all V tokens sorted by (logprob descending, id
ascending), the first n taken. Finite logprobs always sort above -inf, so a masked (or dropped)
id is returned only when the row has fewer than n finite tokens; those trailing places then hold
the lowest masked ids in ascending order, each with logprob exactly -inf (the same tie rule,
lower id first, applied to the -inf tie). Every id is valid (0 <= id < V) and distinct: never
-1, never a duplicate. 0 <= n <= V.

Engine variants (``VARIANTS``, each ``fn(logits, processed_row) -> logprobs row``):

- ``llama.cpp-server`` (``post_sampling_probs: true``): the probabilities of the candidates left
  in ``cur_p`` after the chain, i.e. the softmax of the chain's output (temperature last in the
  default chain): ``processed``. Without ``post_sampling_probs`` the server reports the softmax of
  the raw logits (``raw``). The server lists at most the survivors; this oracle pads to n.
- ``vllm-raw`` (``logprobs_mode="raw_logprobs"``, the default): log-softmax of the model's logits
  before penalties, temperature, min_p and top-k/top-p: ``raw``.
- ``vllm-processed`` (``logprobs_mode="processed_logprobs"``): log-softmax of the logits the
  sampler draws from (after penalties, temperature, min_p, top-k/top-p; -inf for the dropped):
  ``processed``. vLLM returns the sampled token's logprob and the top ``logprobs`` of the same row.
- ``transformers`` (``compute_transition_scores(..., normalize_logits=True)`` on the ``scores``
  of a sampling ``generate``): log-softmax of the processed scores (after the logits processors
  and warpers): ``processed``.
"""
from __future__ import annotations

from typing import Any

import numpy as np

MODES = ("raw", "processed", "sampled", "top_n")


def _row(x: Any, name: str = "logits") -> np.ndarray:
    r = np.asarray(x, dtype=np.float64)
    if r.ndim != 1 or r.size == 0:
        raise ValueError(f"{name} must be one non-empty row, got shape {r.shape}")
    if np.isnan(r).any() or (r == np.inf).any():
        raise ValueError(f"{name} contains NaN or +inf")
    if not np.isfinite(r).any():
        raise ValueError(f"{name} has no finite entry: no distribution")
    return r


def log_softmax(row: Any) -> np.ndarray:
    """l_i - max - ln Σ exp(l_j - max) over the finite entries; -inf exactly where l_i = -inf."""
    r = _row(row)
    fin = np.isfinite(r)
    m = r[fin].max()
    d = np.where(fin, r - m, 0.0)
    e = np.where(fin, np.exp(d), 0.0)
    at_max = fin & (r == m)
    k = float(at_max.sum())
    rest = float(e[~at_max].sum())
    log_s = np.log(k) + np.log1p(rest / k)  # accurate when the tail mass is below u64
    return np.where(fin, d - log_s, -np.inf)


def top_n(lp: Any, n: int) -> tuple[np.ndarray, np.ndarray]:
    """(ids, logprobs) of the first n tokens in (logprob descending, id ascending) order."""
    lp = np.asarray(lp, dtype=np.float64)
    if not 0 <= int(n) <= lp.size:
        raise ValueError(f"n = {n} must be in [0, V = {lp.size}]")
    order = np.lexsort((np.arange(lp.size), -lp))  # last key primary: -lp ascending, then id
    ids = order[: int(n)].astype(np.int64)
    return ids, lp[ids]


def logprobs(logits: Any, mode: str = "raw", *, processed: Any = None, token: int | None = None,
             n: int | None = None, space: str = "raw") -> Any:
    """See the module docstring. ``processed`` is the chain's output row (needed for mode
    "processed" and for space "processed")."""
    if mode not in MODES:
        raise ValueError(f"mode {mode!r}: one of {MODES}")
    raw = _row(logits)
    if mode == "raw":
        return log_softmax(raw)
    if mode == "processed" or (mode in ("sampled", "top_n") and space == "processed"):
        if processed is None:
            raise ValueError("processed logprobs need the chain's output row (processed=)")
        proc = _row(processed, "processed")
        if proc.size != raw.size:
            raise ValueError(f"processed row has {proc.size} entries, the logits {raw.size}")
        lp = log_softmax(proc)
    elif space == "raw":
        lp = log_softmax(raw)
    else:
        raise ValueError(f"space {space!r}: 'raw' or 'processed'")
    if mode == "processed":
        return lp
    if mode == "sampled":
        if token is None or not 0 <= int(token) < raw.size:
            raise ValueError(f"token {token!r} is not an id of a {raw.size}-token row")
        return float(lp[int(token)])
    if n is None:
        raise ValueError("top_n needs n")
    return top_n(lp, n)


def surviving_mass_shift(logits: Any, processed: Any) -> float:
    """-ln(raw mass of the chain's survivors): processed = raw + this, on every survivor, when the
    chain only drops tokens (no temperature, no penalties)."""
    raw = log_softmax(logits)
    keep = np.isfinite(_row(processed, "processed"))
    kept = raw[keep]
    top = kept.max()
    return float(-(top + np.log(np.exp(kept - top).sum())))


def _llama_cpp_server(logits: Any, processed: Any) -> np.ndarray:
    return logprobs(logits, "processed", processed=processed)


def _vllm_raw(logits: Any, processed: Any) -> np.ndarray:
    return logprobs(logits, "raw")


def _vllm_processed(logits: Any, processed: Any) -> np.ndarray:
    return logprobs(logits, "processed", processed=processed)


def _transformers(logits: Any, processed: Any) -> np.ndarray:
    return logprobs(logits, "processed", processed=processed)


VARIANTS = {
    "llama.cpp-server": _llama_cpp_server,
    "vllm-raw": _vllm_raw,
    "vllm-processed": _vllm_processed,
    "transformers": _transformers,
}
"""Engine variant -> (logits, chain output) -> the logprob row that engine reports."""
