"""Property bodies for ``rejection_sample`` (``impl``'s), each ``body(impl, case)``.

The exactness judge (``check_first_token_exact``). For each possible draft d of q_0 the
implementation runs on the product grid a_i = (i + 1/2)/n_a, r_j = (j + 1/2)/n_r (N = n_a·n_r
rows), and count_j(d) (the first emitted token's histogram) is judged against N·P(j | d),
P(j | d) = α·[j = d] + (1 - α)·res_j, α = min(1, p(d)/q(d)), res = (p - q)⁺/Σ(p - q)⁺. With
n_acc accepted rows, |n_acc - n_a·α| <= 1/2 + n_a·δα (a grid of n_a points holds an interval of
length L ceil or floor of n_a·L times; δα: α's float32 error), and each of the n_rej rejected
rows puts count_j within n_r·res_j ± (1 + 2·n_r·κ) on its r-grid (``properties.stratified``:
κ is the residual CDF's error, ``cdf_error`` of the blocked contract with the weights' error h).
So

    |count_j(d) - N·P(j | d)| <= n_r·(1/2 + n_a·δα)·([j = d] + res_j) + n_rej·(1 + 2·n_r·κ)

with n_rej <= n_a·(1 - α) + 1/2 + n_a·δα, and count_j = 0 exactly where the filtered p_j = 0.
δα = α·((1 + ε_p)(1 + u)² - 1) and h = (ε_p·Σp + u·Σw)/Σw, u = 2^-24; ε_p, the target's
renormalisations after its own top-k and top-p, is 2u + γ_n per active filter over the n kept
tokens (0 with both off: p is used as given; ``filters.eps_p``). Summed with the draft law
q̂(d) = q(d)/Σq, Σ_d q̂(d)·count_j(d) must lie within Σ_d q̂(d)·allowed_j(d) of N·L_j,
L = ``oracle.speculative.first_token_law`` = p_0 (up to p_0's float32 rounding, reported as
``law_vs_p``). No statistics: a correct sampler passes for certain.

The filtered target. p is the target after its own top-k and top-p (``oracle.speculative.
target_filter``). Where the exact mass at the top-p cut lies within the fp32 mass window of p,
an engine may legally keep one token more or fewer, and at a cut through tied tokens it keeps
any of them, as many as the cut says (``filters.legal_rows``). An engine filters each position's
row on its own, and each row of a batch is a request of its own, so the bodies judge each
(row, position) on its own (``judge_position``): the output against that position's legal rows,
the oracle's first, passing when one holds it (the oracle's failure is the one reported); whether
a row reaches a position depends on the engine's own accept decisions before it. The exactness
grid measures the law of one filtered row, so there the engine's filter is one legal row for all
the grid's rows (any one: identical rows filtered alike, as gpu_impl, llama.cpp and torch.topk do).
"""
from __future__ import annotations

import numpy as np

import itertools
from dataclasses import replace
from typing import Callable, Iterable, Iterator

from oracle import speculative as spec
from properties.failure import Failure
from properties.numerics import U32
from properties.speculative.filters import cut_class, eps_p, legal_rows
from properties.stratified import cdf_error, grid
from properties.speculative.strategies import SpecCase

FIGURES: list[dict] = []
"""One row per exactness example judged (for the report / the test's summary)."""


def fail(prop: str, case: SpecCase, why: str, category: str = "") -> None:
    raise Failure(why, property=prop, record="rejection_sample", case=case, category=category)


def filtered(case: SpecCase) -> np.ndarray:
    """The target after its own top-k and top-p, float64 (the oracle's; the row as given where
    both are off)."""
    return np.stack([spec.target_filter(row, case.top_k, case.top_p) for row in case.p.astype(np.float64)])


class PositionRows:
    """One position's legal filtered rows, lazily, replayable: every batch row judged at the
    position walks them from the oracle's; the first ``KEEP`` are kept (each is a row of V
    float64, and a window can hold a thousand), later ones are rebuilt for a caller that needs
    them (only a row no nearer legal row explains)."""

    KEEP = 8

    def __init__(self, case: SpecCase, i: int):
        self._make = lambda: legal_rows(case.p[i].astype(np.float64), case.top_k, case.top_p)
        self._gen, self._kept = self._make(), []

    def __iter__(self) -> Iterator[np.ndarray]:
        for j in itertools.count():
            if j < len(self._kept):
                yield self._kept[j]
                continue
            if j > len(self._kept) or len(self._kept) == self.KEEP:
                yield from itertools.islice(self._make(), j, None)
                return
            row = next(self._gen, None)
            if row is None:
                return
            self._kept.append(row)
            yield row


def position_rows(case: SpecCase, i: int) -> PositionRows:
    """The filtered rows an fp32 engine may legally reach at position ``i``, the oracle's first,
    then nearest it (lazily: a caller stops at the first that holds)."""
    return PositionRows(case, i)


def eps(case: SpecCase, pf_row: np.ndarray) -> float:
    return eps_p(pf_row, case.vocab, case.top_k, case.top_p)


def judge_position(rows: Iterable[np.ndarray], judge: Callable[[np.ndarray], None]) -> None:
    """Pass when ``judge`` holds for one of a position's legal filtered ``rows``; else raise the
    failure against the oracle's row (the first). An engine filters each position's row on its
    own, so the positions' legal rows combine freely: judging them one position at a time is exact."""
    first: Failure | None = None
    for pf in rows:
        try:
            judge(pf)
            return
        except Failure as e:
            first = first or e
    assert first is not None
    raise first


def decision(a: float, q: float, p: float, ep: float) -> int:
    """+1 the draft must be accepted (a·q < p), -1 rejected, 0 either (within float32 reach)."""
    if abs(a * q - p) <= 4 * (ep + 2 * U32) * max(p, a * q):
        return 0
    return 1 if a * q < p else -1


def call(impl, case: SpecCase, d: np.ndarray, a: np.ndarray, r: np.ndarray, batch: int | None = None):
    """The impl on ``batch`` copies of the case (broadcast views: no copy) -> (tokens, n_emitted)."""
    b = batch or d.shape[0]
    p = np.broadcast_to(case.p[None], (b, *case.p.shape))
    q = np.broadcast_to(case.q[None], (b, *case.q.shape))
    tokens, n = impl("rejection_sample", p, q, d, a, r, case.top_k, np.full(b, case.top_p, np.float32))
    tokens, n = np.asarray(tokens), np.asarray(n)
    if tokens.shape != (b, case.k + 1) or n.shape != (b,) or not np.issubdtype(tokens.dtype, np.integer):
        fail("shape", case, f"returned {tokens.dtype} tokens {tokens.shape} and n_emitted {n.shape}, "
                            f"expected integers ({b}, {case.k + 1}) and ({b},)")
    pos = np.arange(case.k + 1)[None]
    if ((n < 1) | (n > case.k + 1)).any() or ((tokens >= 0) != (pos < n[:, None])).any() or (tokens >= case.vocab).any():
        fail("padding", case, "tokens must be ids in [0, V) for the n_emitted positions, then -1")
    return tokens, n


def _kappa(w: np.ndarray, pf: np.ndarray, ep: float) -> float:
    s = w.sum()
    h = (ep * pf.sum() + U32 * s) / s
    return cdf_error(int(np.count_nonzero(w)), "blocked", h) if h < 0.5 else 1.0


def check_first_token_exact(impl, case: SpecCase, n_a: int | None = None, n_r: int | None = None) -> None:
    """The law of the first emitted token is p_0 (the module docstring's bound)."""
    if case.k != 1:
        raise ValueError("the exactness grid takes K = 1 cases")
    n_a = n_a or (16 if case.vocab > 2048 else 32)
    n_r = n_r or (64 if case.vocab > 2048 else 128)
    q0, v = case.q[0].astype(np.float64), case.vocab
    n = n_a * n_r
    a = np.repeat(grid(n_a), n_r)[:, None]
    r = np.stack([np.tile(grid(n_r), n_a), np.full(n, 0.5)], axis=1)
    qh = q0 / q0.sum()
    drafts = np.flatnonzero(qh > 0)
    counts = {int(d): np.bincount(call(impl, case, np.full((n, 1), d), a, r)[0][:, 0], minlength=v) for d in drafts}
    # the oracle's row first, then the legal rows nearest it, until one holds the counts
    verdicts = (_exact_verdict(case, p0, qh, counts, n_a, n_r) for p0 in legal_rows(case.p[0], case.top_k, case.top_p))
    first = next(verdicts)
    figure, why = first if first[1] is None else next(((f, w) for f, w in verdicts if w is None), first)
    FIGURES.append(figure)
    if why:
        fail("first_token_exact", case, why)


def _exact_verdict(case: SpecCase, p0: np.ndarray, qh: np.ndarray, counts: dict[int, np.ndarray], n_a: int,
                   n_r: int) -> tuple[dict, str | None]:
    """(the figure row, why it fails or None) of the grid's counts against one filtered target row."""
    q0, v, n = case.q[0].astype(np.float64), case.vocab, n_a * n_r
    ep = eps(case, p0)
    got, want, allowed, stray = np.zeros(v), np.zeros(v), np.zeros(v), 0
    w = spec.residual(p0, q0)
    res = w / w.sum()
    kappa = _kappa(w, p0, ep)
    for d, cnt in counts.items():
        alpha = spec.accept_prob(p0[d], q0[d])
        d_alpha = alpha * ((1 + ep) * (1 + U32) ** 2 - 1)
        e = 0.5 + n_a * d_alpha
        n_rej = min(n_a, n_a * (1 - alpha) + e) if alpha < 1 or d_alpha > 0 else 0.0
        onehot = np.zeros(v)
        onehot[d] = 1
        allow_d = n_r * e * (onehot + res) + n_rej * (1 + 2 * n_r * kappa)
        got += qh[d] * cnt
        want += qh[d] * n * spec.first_token_law_given(p0, q0, d)
        allowed += qh[d] * np.where(p0 > 0, allow_d, 0.0)
        stray += int(cnt[p0 == 0].sum())
    dev = np.abs(got - want)
    j = int(np.argmax(np.where(allowed > 0, dev / np.where(allowed > 0, allowed, 1), np.where(dev > 0, np.inf, -1.0))))
    law = spec.first_token_law(p0, q0)
    figure = {"case": f"{case.family} V={v} top_k={case.top_k} top_p={case.top_p:.6g} drafts={len(counts)}", "N": n,
              "kept": int(np.count_nonzero(p0)), "worst_token": j, "count": round(float(got[j]), 3),
              "N_p": round(float(n * p0[j] / p0.sum()), 3), "N_law": round(float(want[j]), 3),
              "allowed": round(float(allowed[j]), 3),
              "max_dev_over_allowed": round(float(np.max(dev / np.maximum(allowed, 1e-300))), 4),
              "law_vs_p": float(np.abs(law - p0 / p0.sum()).max())}
    if stray:
        return figure, f"{stray} grid draws of tokens the target excludes (p = 0)"
    if dev[j] > allowed[j]:
        return figure, (f"token {j}: q-weighted count {got[j]:.3f} on the {n_a}x{n_r} grid, "
                        f"N·p = {want[j]:.3f}, allowed ± {allowed[j]:.3f}")
    return figure, None


def legal_draws(w: np.ndarray, r: float, kappa: float) -> np.ndarray:
    """Tokens an inverse CDF of ``w`` may return for uniform r within κ of the exact CDF points."""
    cum = np.cumsum(w) / w.sum()
    lo = cum - w / w.sum()
    return (w > 0) & (lo - kappa <= r) & (r < cum + kappa)


def _uniforms(case: SpecCase, b: int) -> tuple[np.ndarray, np.ndarray, np.random.Generator]:
    rng = np.random.default_rng(case.seed)
    a, r = rng.random((b, case.k)), rng.random((b, case.k + 1))
    a[0], r[0] = 0.0, 0.0  # the edges
    r[-1] = 1 - 2.0**-24
    return a, r, rng


def _drafts(case: SpecCase, pf: np.ndarray, rng: np.random.Generator, b: int, bad: bool) -> np.ndarray:
    """Drafts from q (``bad``: half of them on tokens the filtered target excludes, where q > 0)."""
    d = np.stack([rng.choice(case.vocab, size=b, p=row / row.sum()) for row in case.q.astype(np.float64)], axis=1)
    if bad:
        for i in range(case.k):
            out = np.flatnonzero((pf[i] == 0) & (case.q[i] > 0))
            if out.size:
                d[::2, i] = rng.choice(out, size=d[::2, i].shape)
    return d


def check_matches_oracle(impl, case: SpecCase, batch: int = 32) -> None:
    """Every row is the oracle's, up to decisions within float32 reach of a threshold (a row that
    takes such a decision the rejecting way is not compared further) and the legal rows' choices;
    no emitted token has filtered p = 0. Judged row by row and position by position: a row reaches
    position i when the engine accepted its drafts before i, whatever the target rows."""
    a, r, rng = _uniforms(case, batch)
    d = _drafts(case, filtered(case), rng, batch, bad=True)
    judge_rows(case, d, a, r, *call(impl, case, d, a, r))


def judge_rows(case: SpecCase, d: np.ndarray, a: np.ndarray, r: np.ndarray, tokens: np.ndarray, n: np.ndarray) -> None:
    """Each row of a call, each position it emitted, against that position's legal rows."""
    reach = np.ones(d.shape[0], bool)
    for i in range(case.k + 1):
        rows = position_rows(case, i)
        for b in np.flatnonzero(n > i):
            judge_position(rows, lambda pf_i: _judge_row(case, i, pf_i, b, d, a, r, tokens, n, bool(reach[b])))
        if i < case.k:
            reach &= (n > i + 1) & (tokens[:, i] == d[:, i])


def _judge_row(case: SpecCase, i: int, pf_i: np.ndarray, b: int, d, a, r, tokens, n, reached: bool) -> None:
    """Row ``b``'s token at position ``i`` against one filtered target row of the position: never a
    token it excludes; where the row reached ``i``, the accept decision and the draw."""
    if pf_i[tokens[b, i]] <= 0:
        fail("never_excluded", case, f"row {b} emitted token {tokens[b, i]} at position {i}, where the target has p = 0")
    if not reached:
        return
    ep = eps(case, pf_i)
    if i == case.k:
        w, kap = pf_i, _kappa(pf_i, pf_i, ep)
    else:
        di, pi, qi = int(d[b, i]), pf_i[d[b, i]], float(case.q[i, d[b, i]])
        dec = decision(a[b, i], qi, pi, ep)
        accepted = n[b] > i + 1 and tokens[b, i] == di
        if dec > 0 and not accepted:
            fail("matches_oracle", case, f"row {b}: draft {di} at position {i} must be accepted "
                                         f"(a·q = {a[b, i] * qi:.6g} < p = {pi:.6g})")
        if dec >= 0:
            return  # accepted (its next position is judged there), or rejected where either is legal
        w = spec.residual(pf_i, case.q[i])
        kap = _kappa(w, pf_i, ep)
    if n[b] != i + 1:
        fail("matches_oracle", case, f"row {b}: must stop at position {i}, emitted {n[b]} tokens")
    if not legal_draws(w, r[b, i], kap)[tokens[b, i]]:
        fail("matches_oracle", case, f"row {b}: position {i} drew {tokens[b, i]} for r = {r[b, i]:.9g}; "
                                     f"the oracle draws {spec.inverse_cdf(w, r[b, i])}")


def check_all_accepted(impl, case: SpecCase, batch: int = 16) -> None:
    """q = p (the target given already filtered, its filters off): every draft is accepted (a·p < p for
    a < 1), the bonus comes from p_K with r_K."""
    pf = filtered(case).astype(np.float32)
    same = SpecCase(case.family, pf, pf[:case.k].copy(), 0, case.seed, 1.0)
    a, r, rng = _uniforms(same, batch)
    d = _drafts(same, pf, rng, batch, bad=False)
    tokens, n = call(impl, same, d, a, r)
    for b in range(batch):
        if n[b] != case.k + 1 or (tokens[b, :case.k] != d[b]).any():
            fail("all_accepted", same, f"row {b}: q = p, drafts {d[b].tolist()} (a = {a[b].tolist()}) gave {tokens[b].tolist()}")
        w = pf[case.k].astype(np.float64)
        if not legal_draws(w, r[b, -1], _kappa(w, w, 0.0))[tokens[b, -1]]:
            fail("all_accepted", same, f"row {b}: bonus {tokens[b, -1]} for r = {r[b, -1]:.9g}, "
                                       f"the oracle draws {spec.inverse_cdf(w, r[b, -1])}")


def check_all_rejected(impl, case: SpecCase, batch: int = 16) -> None:
    """Drafts the target excludes (p = 0, q > 0), or with a >= p/q: position 0 rejects, and the
    one token emitted comes from the residual max(0, p_0 - q_0) with r_0."""
    pf = filtered(case)
    a, r, rng = _uniforms(case, batch)
    d = _drafts(case, pf, rng, batch, bad=False)
    ratio = np.array([spec.accept_prob(pf[0, x], float(case.q[0, x])) for x in d[:, 0]])
    out = np.flatnonzero((pf[0] == 0) & (case.q[0] > 0))
    if out.size:
        d[::2, 0] = rng.choice(out, size=d[::2, 0].shape)
        ratio[::2] = 0.0
    rows = np.flatnonzero(ratio < 0.999)
    if rows.size == 0:  # no draft can be rejected (p >= q on q's support, p > 0 everywhere)
        return check_matches_oracle(impl, case, batch=4)
    a[:, 0] = np.minimum(ratio + (1 - ratio) * rng.random(batch) + 2.0**-16, 1 - 2.0**-24)
    tokens, n = call(impl, case, d[rows], a[rows], r[rows])

    def judge(pf0: np.ndarray, i: int, b: int) -> None:
        ep = eps(case, pf0)
        if decision(a[b, 0], float(case.q[0, d[b, 0]]), pf0[d[b, 0]], ep) >= 0:
            return  # this filtered target may accept it
        w = spec.residual(pf0, case.q[0])
        if n[i] != 1 or w[tokens[i, 0]] <= 0:
            fail("all_rejected", case, f"row {b}: draft {d[b, 0]} with a = {a[b, 0]:.6g} >= p/q = {ratio[b]:.6g} "
                                       f"gave {tokens[i].tolist()}; it must stop with one residual token")
        if not legal_draws(w, r[b, 0], _kappa(w, pf0, ep))[tokens[i, 0]]:
            fail("all_rejected", case, f"row {b}: residual token {tokens[i, 0]} for r = {r[b, 0]:.9g}, "
                                       f"the oracle draws {spec.inverse_cdf(w, r[b, 0])}")
    legal = position_rows(case, 0)
    for i, b in enumerate(rows):
        judge_position(legal, lambda pf0: judge(pf0, i, b))


def check_tie_at_cut(impl, case: SpecCase, batch: int = 32) -> None:
    """The target's top-k or top-p with a tie at the cut keeps exactly m of the tokens tied there
    (any m: ``filters.kept_sets``), so a kept token's probability is its value over the mass of the
    tokens above the cut and m tied ones. The draft probes it: q puts most of its mass on one kept
    token (above the cut where there is one, else tied) and the rest on the tied tokens; half the
    rows draft that token with a·q between its probability with the whole tie class kept and with
    m kept (a sampler that keeps every tied token rejects a draft that must be accepted there),
    the others draft tied tokens at uniform a. Every row judged on its own against the legal rows
    (``judge_rows``)."""
    cut = cut_class(case.p[0], case.top_k, case.top_p)
    if cut is None:  # no choice among ties at position 0's cut in this case
        return check_matches_oracle(impl, case, batch=4)
    above, tied, m = cut
    row = case.p[0].astype(np.float64)
    probe = int(above[0] if above.size else tied[0])
    p_m = row[probe] / (row[above].sum() + m * row[tied[0]])
    p_all = row[probe] / (row[above].sum() + row[tied].sum())
    q0 = np.zeros(case.vocab)
    q0[probe] = min(1.0, max(0.5, 1.25 * p_m))
    others = tied[tied != probe]
    q0[others] = (1 - q0[probe]) / max(others.size, 1)
    q = case.q.copy()
    q[0] = (q0 / q0.sum()).astype(np.float32)
    probed = replace(case, q=q)
    a, r, rng = _uniforms(probed, batch)
    d = _drafts(probed, filtered(probed), rng, batch, bad=False)
    d[::2, 0] = probe
    lo, hi = p_all / float(q[0, probe]), min(p_m / float(q[0, probe]), 1.0)
    a[::2, 0] = lo + (hi - lo) * rng.uniform(0.05, 0.95, size=a[::2, 0].shape)
    d[1::2, 0] = rng.choice(tied, size=d[1::2, 0].shape)
    judge_rows(probed, d, a, r, *call(impl, probed, d, a, r))


def check_zero_draft_accepted(impl, example: tuple[SpecCase, int]) -> None:
    """A draft of draft probability 0 and filtered target probability > 0 is accepted for every
    acceptance uniform (``zero_draft.py``); a token the target's own filters drop is not judged."""
    from properties.speculative.zero_draft import ACCEPT_U

    case, j = example
    if all(pf0[j] <= 0 for pf0 in position_rows(case, 0)):
        return
    n = len(ACCEPT_U)
    d = np.zeros((n, case.k), np.int64)
    d[:, 0] = j
    a = np.zeros((n, case.k))
    a[:, 0] = ACCEPT_U
    r = np.full((n, case.k + 1), 0.5)
    tokens, _ = call(impl, case, d, a, r)
    wrong = np.flatnonzero(tokens[:, 0] != j)
    if wrong.size and not any(pf0[j] <= 0 for pf0 in position_rows(case, 0)):
        i = int(wrong[0])
        fail("zero-probability draft accepted", case,
             f"draft {j} has q = 0 and p = {float(filtered(case)[0, j]):.6g}: accepted for every a (α = min(1, p/q) = 1), "
             f"but at a = {ACCEPT_U[i]!r} the first emitted token is {int(tokens[i, 0])}")
