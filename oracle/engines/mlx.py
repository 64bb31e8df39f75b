"""MLX (``mlx_lm.sample_utils`` of mlx-lm 0.32.2, the sampler ``make_sampler`` builds and the
processors ``make_logits_processors`` builds, as ``mlx_lm.generate.generate_step`` runs them),
float64.

- penalties on the logits, over the last ``repeat_last_n`` tokens of prompt + output (MLX's
  ``*_context_size``; a size of 0 slices ``tokens[-0:]``, the whole history): repetition
  (l < 0 ? l·r : l/r) on each windowed token once, then presence (subtracted once), then
  frequency (once per occurrence) - llama.cpp's order;
- the sampler sees log-probabilities of the penalised logits (``logits - logsumexp``), *untempered*:
  every filter runs before the temperature, which divides only inside ``categorical_sampling``;
- the chain is fixed: top_p, min_p, XTC, top_k (top_k last: top_p measures the full
  distribution, so its cut equals a top_p on the un-renormalised top-k mass);
- top_p: ascending sort, a token is dropped when the mass strictly above it (in sort order) is
  already >= p·total; the cut is a *value* threshold, so every token tied with the boundary
  token stays (``top_p_ties``);
- min_p: keep logprob >= max + ln(min_p) (p = min_p·p_max kept); ``min_tokens_to_keep`` of the
  largest always kept;
- top_k: ``argpartition`` keeps exactly k (which of tied tokens is unspecified); k >= vocab raises
  ``ValueError`` in MLX - this variant runs it as a no-op, as the other engines do (the real
  engine's refusal is a ledger finding, ``properties/peers/mlx``);
- temperature 0 is ``greedy_sampler`` (the first argmax of the penalised logprobs; no filter
  runs); any other temperature, negative included, samples ``categorical(masked / t)``
  (Gumbel-max over the float32 logits: the softmax law).
"""
from __future__ import annotations

import math

import numpy as np

from oracle.candidates import descending_order
from oracle.engines.settings import (Settings, as_row, counts, first_argmax_onehot, require, softmax, uniforms,
                                     with_traits)

NAME = "mlx"
PEER = "mlx 0.32.4 / mlx-lm 0.32.2, CPU (properties/peers/mlx)"  # the real engine this variant is judged against, at its pinned release
SUPPORTS = frozenset({"temperature", "top_k", "top_p", "min_p", "repetition_penalty", "presence_penalty",
                      "frequency_penalty"})
TRAITS = dict(temp_first=False, min_p_space="pre-temperature", ties="exactly k", typical_position=None,
              typical_ties=None, top_p_renormalises=False, min_p_before_top_p=False, min_p_equal_kept=True,
              window=True, freq_scope="prompt+output", penalty_order="repetition first", law="softmax",
              greedy="t <= 0", top_p_ties="keeps ties")
# each switch removes one difference from another engine (the matrix's explanations): filters on
# tempered probabilities, min_p in tempered space, top_k keeping ties, top_p on the renormalised
# top-k mass (top_k first), top_p cutting exactly at its crossing position, no window, min_p
# removing p = min_p·p_max, min_p before top_p, presence/frequency over the output only, and
# presence/frequency before the repetition penalty
TOGGLES = frozenset({"temp_first", "min_p_space", "ties", "top_p_renormalises", "top_p_ties", "window",
                     "min_p_equal_kept", "min_p_before_top_p", "freq_scope", "penalty_order"})


def penalties(x: np.ndarray, s: Settings, tr: dict) -> np.ndarray:
    """The three processors on one row; ``tr`` may stretch the window or move the count scope."""
    hist = s.history if not tr["window"] else _window(s.history, s.repeat_last_n)
    scope = hist if tr["freq_scope"] == "prompt+output" else _window(s.output, s.repeat_last_n) if tr["window"] \
        else tuple(s.output)
    seen = counts(hist, x.size) > 0
    c = counts(scope, x.size).astype(np.float64)
    r = float(s.repetition_penalty)

    def repeat(y):
        return np.where(seen, np.where(y < 0, y * r, y / r), y) if r != 1.0 else y

    def subtract(y):
        return y - (c > 0) * float(s.presence_penalty) - c * float(s.frequency_penalty)
    return subtract(repeat(x)) if tr["penalty_order"] == "repetition first" else repeat(subtract(x))


def _window(hist, n: int) -> tuple[int, ...]:
    """``tokens[-n:]``: the last n, and for n = 0 the whole history (Python's -0 slice)."""
    return tuple(hist)[-int(n):] if int(n) != 0 else tuple(hist)


def penalised(logits: np.ndarray, s: Settings, **traits) -> np.ndarray:
    require(NAME, SUPPORTS, s)
    tr = with_traits(NAME, TRAITS, TOGGLES, traits)
    x = as_row(logits)
    if s.repetition_penalty != 1.0 or s.presence_penalty != 0.0 or s.frequency_penalty != 0.0:
        x = penalties(x, s, tr)
    return x


def top_p_keep(logprobs: np.ndarray, p: float, keep_ties: bool = True) -> np.ndarray:
    """``apply_top_p``'s survivors: drop a token once the mass above it reaches p·total; the cut
    is the boundary token's value (every tie kept), or its position (``keep_ties=False``)."""
    probs = np.exp(logprobs - logprobs.max())
    order = descending_order(logprobs)
    above = np.concatenate([[0.0], np.cumsum(probs[order])[:-1]])  # mass strictly before each position
    n_kept = int((above < float(p) * probs.sum()).sum())
    keep = np.zeros(logprobs.size, dtype=bool)
    if keep_ties:
        keep[logprobs >= logprobs[order[n_kept - 1]]] = True
    else:
        keep[order[:n_kept]] = True
    return keep & np.isfinite(logprobs)


def min_p_keep(logprobs: np.ndarray, m: float, min_keep: int, equal_kept: bool = True) -> np.ndarray:
    """``apply_min_p``'s survivors: logprob >= max + ln m (the normaliser cancels), plus the
    ``min_keep`` largest (ties by lower id)."""
    d = logprobs - logprobs.max()
    keep = d >= math.log(m) if equal_kept else d > math.log(m)
    if min_keep > 1:
        keep[descending_order(logprobs)[:min_keep]] = True
    return keep & np.isfinite(logprobs)


def top_k_keep(logprobs: np.ndarray, k: int, keep_ties: bool = False) -> np.ndarray:
    """``apply_top_k``'s survivors: exactly k (the lowest ids among ties here; MLX's argpartition
    leaves which unspecified), or every tie with the k-th (``keep_ties``)."""
    keep = np.zeros(logprobs.size, dtype=bool)
    if keep_ties:
        keep[logprobs >= logprobs[descending_order(logprobs)[k - 1]]] = True
    else:
        keep[descending_order(logprobs)[:k]] = True
    return keep & np.isfinite(logprobs)


def xtc_keep(logprobs: np.ndarray, threshold: float, special=()) -> np.ndarray:
    """``apply_xtc`` when its draw says "cut": drop every token whose p (softmax over the current,
    masked row) exceeds the smallest p above ``threshold`` - strictly, so every token tied with that
    smallest one stays; ``special`` ids are never dropped. No ``min_keep``."""
    p = softmax(logprobs)
    above = p[p > float(threshold)]
    keep = np.isfinite(logprobs)
    if above.size:
        drop = p > above.min()
        drop[list(special)] = False
        keep &= ~drop
    return keep


def masked(logits: np.ndarray, s: Settings, **traits) -> np.ndarray:
    """The logprobs ``make_sampler``'s chain hands to ``categorical_sampling`` (-inf = removed),
    before the temperature divides them."""
    tr = with_traits(NAME, TRAITS, TOGGLES, traits)
    x = penalised(logits, s, **traits)
    t = float(s.temperature)
    lp = x - x.max() - math.log(np.exp(x - x.max()).sum())
    seen = lp / t if tr["temp_first"] and t > 0 else lp  # the filters' view of the row
    keep = np.isfinite(lp)
    k = int(s.top_k) if 0 < int(s.top_k) < lp.size else 0
    if k and tr["top_p_renormalises"]:  # top_k first, top_p on the renormalised top-k mass
        keep &= top_k_keep(seen, k, tr["ties"] == "keeps ties")

    def cut(mask):
        nonlocal keep
        keep &= mask

    def top_p():
        if 0.0 < float(s.top_p) < 1.0:
            cut(top_p_keep(np.where(keep, seen, -np.inf), s.top_p, tr["top_p_ties"] == "keeps ties"))

    def min_p():
        if float(s.min_p) != 0.0:  # in tempered space when that switch is on: (p_i/p_max)^(1/t) >= min_p
            view = lp / t if (tr["temp_first"] or tr["min_p_space"] == "post-temperature") and t > 0 else lp
            cut(min_p_keep(np.where(keep, view, -np.inf), float(s.min_p), int(s.min_tokens_to_keep),
                           tr["min_p_equal_kept"]))

    for stage in ((min_p, top_p) if tr["min_p_before_top_p"] else (top_p, min_p)):
        stage()
    if k and not tr["top_p_renormalises"]:
        keep &= top_k_keep(np.where(keep, seen, -np.inf), k, tr["ties"] == "keeps ties")
    return np.where(keep, lp, -np.inf)


def distribution(logits: np.ndarray, s: Settings, **traits) -> np.ndarray:
    t = float(s.temperature)
    if t == 0.0:
        return first_argmax_onehot(penalised(logits, s, **traits))
    return softmax(masked(logits, s, **traits) / t)


def sample(logits: np.ndarray, s: Settings, noise) -> int:
    """Gumbel-max with one uniform per token (``mx.random.categorical``): argmax(l/t - ln(-ln u))."""
    if float(s.temperature) == 0.0:
        return int(np.argmax(penalised(logits, s)))
    y = masked(logits, s) / float(s.temperature)
    u = uniforms(noise, y.size)
    with np.errstate(divide="ignore"):
        g = -np.log(-np.log(u))
    return int(np.argmax(np.where(np.isfinite(y), y + g, -np.inf)))
