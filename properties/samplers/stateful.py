"""Every output of a stateful sampler is judged: mirostat_v2's updated mu.

mirostat_v2 returns the token and the state the next call starts from,
new_mu = mu - eta·(-log2 q_j - tau), q_j the chosen token's probability renormalised over the
survivors (tokens whose surprise -log2 p is at most mu). A wrong state is a silent bug: the tokens
of this call are right and every later call samples from the wrong truncation (a stale mu, or a
surprise read from the full-row softmax instead of the renormalised one).

Legal values. Which tokens survive may go either way within rounding of mu: the record's
``variants`` bracket it. q_j falls as the survivor set grows, so over the legal sets that hold j
new_mu spans [lo, hi], the values at the smallest and largest such set (with the caller's mu:
the variants move the threshold, not the state).

Error model, float32 (u = 2^-24), each term one rounding an implementation cannot avoid:
* q̂_j = fl(ê_j / ŝ): ê_i = expf(fl(l_i - max)) within a factor 1 ± ε_i,
  1 + ε_i = (1 + exp_u(l_i - max)·u)·e^{u|l_i - max|} (the contract's exp, ``numerics.exp_u``), of e^{l_i - max}; ŝ a float32 sum of the n kept
  weights in any order, within γ_{n-1}; one more rounding for the division. With ε the largest
  ε_i over the survivors, |q̂_j/q_j - 1| <= ρ = (1 + ε)(1 + u)/((1 - ε)(1 - γ_{n-1})) - 1, and
  |log2 q̂_j - log2 q_j| <= -log2(1 - ρ).
* log2f within the contract's ``log_error_u`` of its result; the subtraction of tau, the product with eta and the
  subtraction from mu one rounding each; mu, tau and eta themselves rounded to float32 on input.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import numpy as np

from properties.numerics import F32_TINY, U32, exp_u, gamma, log_error_u

from properties.measure import ErrorReport
from properties.samplers.record import row_digest

if TYPE_CHECKING:
    from properties.samplers.record import Params, SamplerRecord


def _survivor_q(record: "SamplerRecord", row64: np.ndarray, params: "Params", token: int) -> list[tuple[float, int]]:
    """(q_token, survivors) for each variant whose survivor set holds ``token``."""
    # one sort and one digest of the row for all nine variants
    out, start, rk = [], record.candidates(row64), row_digest(row64)
    for v in record.variants(params, row64):
        cur = record.run_oracle(row64, v, start=start, row_key=rk)
        at = np.flatnonzero(cur.ids == token)
        if at.size:
            out.append((float(cur.p[at[0]]), int(cur.size)))
    return out


def _allowance(row64: np.ndarray, q: float, n_kept: int, params: "Params") -> float:
    """Absolute error a float32 mirostat_v2 may make in new_mu (module docstring)."""
    finite = row64[np.isfinite(row64)]
    d = float(np.sort(np.abs(finite - finite.max()))[n_kept - 1])  # the survivors: the n_kept largest
    eps = (1 + exp_u(d) * U32) * math.exp(U32 * d) - 1  # the worst weight's error, token j's included
    rho = (1 + eps) * (1 + U32) / ((1 - eps) * (1 - gamma(n_kept - 1, U32))) - 1
    surprise = abs(math.log2(q)) - math.log2(1 - rho)  # an upper bound on |log2 q̂|
    mu, tau, eta = abs(params["mu"]), abs(params["tau"]), abs(params["eta"])
    t2 = surprise + tau  # |-log2 q̂ - tau|
    return (eta * -math.log2(1 - rho)              # q̂'s error through log2
            + U32 * eta * log_error_u(surprise * math.log(2), base=2)  # log2f
            + U32 * eta * t2 * 2                   # - tau, then eta's input rounding
            + U32 * eta * tau                      # tau's input rounding
            + U32 * eta * t2                       # the product eta·(...)
            + U32 * (mu + eta * t2) * 2)           # mu's input rounding, the final subtraction


def judge_mu(record: "SamplerRecord", row64: np.ndarray, params: "Params", token: int,
             outputs: tuple) -> tuple[str | None, ErrorReport | None]:
    """(why the returned mu is wrong or None, its error in u of |new_mu|) for a legal ``token``."""
    if not outputs:
        return "returned no updated mu (mirostat_v2 returns (ids, new_mu))", None
    got = float(np.asarray(outputs[0]))
    legal = _survivor_q(record, row64, params, token)
    if not legal:
        return None, None  # an illegal token: the selection check reports it
    values = [params["mu"] - params["eta"] * (-math.log2(q) - params["tau"]) for q, _ in legal]
    lo, hi = min(values), max(values)
    allowed = max(_allowance(row64, q, n, params) for q, n in legal)
    miss = max(lo - got, got - hi, 0.0) if math.isfinite(got) else math.inf
    scale = U32 * max(abs(lo), abs(hi), F32_TINY)
    rep = ErrorReport(miss / scale, allowed / scale, int(token))
    if rep.ok:
        return None, rep
    return (f"returned mu {got!r}; the oracle's updated mu for token {token} lies in [{lo!r}, {hi!r}] "
            f"(survivor sets within rounding of mu), allowance {allowed:.3g}: off by {miss:.3g} "
            f"({rep.worst_u:.3g} u against {rep.bound_u:.3g} u)"), rep
