"""Token selection: greedy, dist (inverse CDF in vocab order) and mirostat v2.

Every selector returns int64 ``[B]`` ids of tokens with a finite logit and raises ``ValueError``
for a row with none. The uniforms are drawn on the host (llama.cpp's RNG streams stay there).
"""
from __future__ import annotations

from typing import Any

from gpu_impl._array import as_logits, on_device, quiet, require_candidates, row_param, unit_param
from gpu_impl._deferred import validated
from gpu_impl._graphs import replayed
from gpu_impl._order import first_reach, first_true, last_true, nth_true, sorted_top
from gpu_impl.softmax import exp_shifted

_BLOCK = 1024  # dist: columns per block of the two-level prefix sum


@validated
def greedy(logits: Any) -> Any:
    """The first maximal logit of each row (lowest id among ties)."""
    xp, x, row_max = as_logits(logits)
    require_candidates(xp, row_max, "greedy")
    return xp.argmax(x, axis=1).astype(xp.int64)


def _dist_exact(xp: Any, e: Any, u: Any) -> Any:
    """Reference path: one double running sum over the whole row."""
    run = xp.cumsum(e, axis=1, dtype=xp.float64)
    hit = (run >= (run[:, -1] * u)[:, None]) & (e > 0)
    idx = first_true(xp, hit)
    # never reached (rounding): the last token with weight, as llama.cpp's size - 1 fallback
    return xp.where(hit.any(axis=1), idx, last_true(xp, e > 0))


def _dist_index(xp: Any, e: Any, u: Any) -> Any:
    """First column whose running sum of ``e`` reaches ``S * u``, where S is the row sum.

    Two levels instead of one running sum over V: block sums locate the block, then a running
    sum inside that block only. Sums are double, as in llama.cpp's dist.
    """
    B, V = e.shape
    bs = min(_BLOCK, V)
    nb = -(-V // bs)
    ep = e if nb * bs == V else xp.concatenate([e, xp.zeros((B, nb * bs - V), xp.float32)], axis=1)
    blocks = ep.reshape(B, nb, bs)
    block_run = xp.cumsum(blocks.sum(axis=2, dtype=xp.float64), axis=1)
    target = block_run[:, -1] * u
    bi = xp.minimum(first_reach(xp, block_run, target), nb - 1)
    rows = xp.arange(B)
    before = xp.where(bi > 0, block_run[rows, xp.maximum(bi - 1, 0)], 0.0)
    run = before[:, None] + xp.cumsum(blocks[rows, bi], axis=1, dtype=xp.float64)
    j = first_reach(xp, run, target)
    idx = xp.minimum(bi * bs + j, V - 1)
    # u == 0 (target 0 is met by a zero weight) or block/element rounding disagreeing: redo exactly
    bad = (j >= bs) | (e[rows, idx] <= 0)
    if bool(bad.any()):
        sel = xp.nonzero(bad)[0]
        idx[sel] = _dist_exact(xp, e[sel], u[sel])
    return idx


@replayed(data=("u",))
@validated
def dist(logits: Any, u: Any) -> Any:
    """llama.cpp's dist with the uniform ``u`` [B] (float64, in [0, 1)) supplied per row.

    With ``e_i = exp(l_i - max)`` (float32) and ``S = sum e``: the first token, in vocab order,
    whose double running sum of ``e`` is ``>= S * u``; never a token with ``e == 0``.
    """
    xp, x, row_max = as_logits(logits)
    return dist_of_rows(xp, x, row_max, u)


def dist_of_rows(xp: Any, x: Any, row_max: Any, u: Any) -> Any:
    """dist on validated float32 rows and their row max (what the fused chain hands over)."""
    require_candidates(xp, row_max, "dist")
    u = unit_param(u, x.shape[0], "u", xp)
    if on_device(xp, x):
        from gpu_impl import kernels
        return kernels.dist_rows(xp.ascontiguousarray(x), row_max, u)
    e, _ = exp_shifted(xp, x, row_max)
    return _dist_index(xp, e, u).astype(xp.int64)


@validated
def mirostat_v2(logits: Any, mu: Any, u: Any, tau: Any, eta: Any) -> tuple[Any, Any]:
    """Mirostat 2.0: ``(ids int64 [B], new_mu float32 [B])``.

    Tokens whose surprise ``-log2 p`` exceeds ``mu`` are dropped (the most probable token always
    stays), the survivors are renormalised with a fresh softmax, and the token is picked as
    libstdc++'s ``discrete_distribution`` does: in descending-probability order (ties: lower id
    first), the first index whose double cumulative probability is ``>= u``, the last
    cumulative forced to 1.0. ``new_mu = mu - eta * (-log2 p_selected - tau)``.
    """
    xp, x, row_max = as_logits(logits)
    B, V = x.shape
    require_candidates(xp, row_max, "mirostat_v2")
    mu = row_param(mu, B, "mu", xp)
    u = unit_param(u, B, "u", xp)
    tau = row_param(tau, B, "tau", xp)
    eta = row_param(eta, B, "eta", xp)

    e, s = exp_shifted(xp, x, row_max)
    with quiet():
        surprise = -xp.log2(e / s[:, None])
    keep = surprise <= mu[:, None]
    none = ~keep.any(axis=1)
    # nothing within mu: llama.cpp still keeps its top token (unconditional: no device read)
    keep |= none[:, None] & (xp.arange(V)[None, :] == xp.argmax(x, axis=1)[:, None])
    n_keep = keep.sum(axis=1)
    s_kept = xp.where(keep, e, xp.float32(0)).sum(axis=1)

    # surprise grows as the logit falls, so the survivors are a prefix of the descending order
    vals = sorted_top(xp, x, int(n_keep.max()))
    pos = xp.arange(vals.shape[1])[None, :]
    with quiet():  # renormalised over the survivors, as llama.cpp's second softmax
        q = xp.where(pos < n_keep[:, None], xp.exp(vals - row_max[:, None]) / s_kept[:, None], 0)
    w = q.astype(xp.float64)
    cum = xp.cumsum(w / w.sum(axis=1, keepdims=True), axis=1)
    cum = xp.where(pos >= (n_keep - 1)[:, None], 1.0, cum)
    j = xp.minimum(first_reach(xp, cum, u), n_keep - 1)

    rows = xp.arange(B)
    v = vals[rows, j]
    # position j in the sorted order -> token id: the (j - #greater)-th token equal to v
    r = j - (x > v[:, None]).sum(axis=1)
    ids = nth_true(xp, x == v[:, None], r)
    with quiet():
        new_mu = mu - eta * (-xp.log2(q[rows, j]) - tau)
    return ids.astype(xp.int64), new_mu.astype(xp.float32)
