"""Token logprobs (``engines.logprobs_top_n``, ``engines.logprobs_of``): cases, property bodies
and the room's table (``PROPERTIES``), shared by ``test_logprobs.py`` and the zoo's logprob hunt.

Error bound. A returned logprob of token i is judged against the float64 log-softmax of the row
the implementation was given (``oracle.logprobs``) with the ops' log-softmax model
(``properties.ops.models.log_softmax_model``, under the active contract): absolute error at most

    u·(2|d_i| + exp_u(d_i) + Ē + depth(n) + log_error_u(ln S) + |y_i| + 3),   d_i = l_i - max, y_i the exact logprob,

(Ē the p-weighted mean of |d| + exp_u over the row, depth(n) the normaliser's summation depth,
log_error_u(ln S) logf's error under the contract, 2|ln S| strict, 3 the subtractions), measured with ``measure.scaled_error`` (reported in u
of the model's scale). -inf must come out exactly where the token is masked (or dropped by the
chain), and nowhere else.

Top-n convention (``oracle.logprobs``): the first n tokens in logit-descending order: sorted
descending, no duplicate ids, every id in [0, V); masked ids only when the row has fewer than n
finite tokens, then with logprob exactly -inf (never -1, never a repeat). Equal values are a tie
(``properties.ties``): tied tokens may come in any order and, at the n-th place, any of them may
be the one listed (torch.topk defines no order among equal values; the oracle's id-ascending
order is one legal answer), masked pads included. Any other order is accepted only where the
swapped tokens' exact logprobs lie within the sum of their allowances (a rounding tie).

0.0 only where p = 1: a returned 0.0 claims p_i = 1, accepted where 1 - p_i is within the
token's allowance; a row's only finite token must get exactly 0.0; the returned probabilities
may not sum past 1 + their allowances.

Processed vs raw: the processed row is the implementation's own chain output (vLLM's, the
transformers warpers', llama.cpp's default chain). Processed logprobs are judged against the
log-softmax of that row (dropped tokens exactly -inf, never listed while n survivors exist), and
at t = 1 with no penalties (a chain that only drops tokens) processed_i - raw_i must equal
-ln(raw mass of the survivors) within both logprobs' allowances.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
from hypothesis import strategies as st

from oracle import logprobs as olp
from properties.failure import Failure
from properties.property import Property
from properties.measure import scaled_error
from properties.numerics import F32_TINY, FTZ_FLOOR, U32
from properties.ops.models import log_softmax_model
from properties.ops.strategies import OpCase
from properties.profiles import large_vocab_max_batch
from properties.samplers.strategies import FAMILIES, make_logits, vocab_sizes

TILE = 256
FAMILY_NAMES = ("peaked", "flat", "zipf", "plateaus", "near_ties", "neg_inf", "huge", "one_finite",
                "few_finite", "masked_tiles", "tied_top")
N_CHOICES = (1, 2, 5, 20, 64, "all")


def _row(family: str, vocab: int, seed: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    if family in FAMILIES:
        return make_logits(family, vocab, seed)
    if family == "few_finite":  # fewer finite tokens than n (when n > 1): the pad convention
        x = np.full(vocab, -np.inf)
        k = int(rng.integers(1, max(2, min(n, vocab))))
        x[rng.choice(vocab, size=k, replace=False)] = rng.normal(0, 3, k)
    elif family == "masked_tiles":  # whole tiles of -inf, a few finite tokens in the others
        w = TILE if vocab > TILE else max(1, vocab // 4)
        x = np.full(vocab, -np.inf)
        tiles = np.arange(0, vocab, w)
        live = tiles[rng.random(tiles.size) < 0.3]
        live = live if live.size else tiles[:1]
        for t in live:
            span = np.arange(t, min(t + w, vocab))
            pick = span[rng.random(span.size) < rng.uniform(0.0, 0.2)]
            x[pick if pick.size else span[:1]] = rng.normal(0, 2, max(pick.size, 1))
    elif family == "tied_top":  # several tokens share the maximum, the rest well below
        x = rng.normal(-6, 2, vocab)
        x[rng.choice(vocab, size=min(vocab, int(rng.integers(1, 6))), replace=False)] = 1.5
    else:
        raise KeyError(family)
    return x.astype(np.float32)


@dataclass
class LpCase:
    """A batch of rows, the n of a top-n call and one token id per row; the repr is the recipe."""
    family: str
    vocab: int
    seeds: tuple[int, ...]
    n_choice: Any
    logits: np.ndarray = field(default=None, repr=False)  # type: ignore[assignment]
    ids: np.ndarray = field(default=None, repr=False)  # type: ignore[assignment]

    def __post_init__(self) -> None:
        if self.logits is None:
            self.logits = np.stack([_row(self.family, self.vocab, s, self.n) for s in self.seeds]).astype(np.float32)
        if self.ids is None:
            self.ids = np.array([pick_id(self.logits[b], s) for b, s in enumerate(self.seeds)], dtype=np.int64)

    @property
    def n(self) -> int:
        return self.vocab if self.n_choice == "all" else min(int(self.n_choice), self.vocab)


def pick_id(row: np.ndarray, seed: int) -> int:
    """A masked token, the top token, the last id or any token, by the seed."""
    rng = np.random.default_rng(seed + 7)
    masked = np.flatnonzero(~np.isfinite(row))
    kind = int(rng.integers(4))
    if kind == 0 and masked.size:
        return int(rng.choice(masked))
    if kind == 1:
        return int(np.argmax(row))
    return int(row.size - 1) if kind == 2 else int(rng.integers(row.size))


def cases(families: tuple[str, ...] = FAMILY_NAMES) -> st.SearchStrategy[LpCase]:
    def build(family, vocab, n_choice, seeds):
        if n_choice == "all" and vocab > 1025:
            n_choice = 64
        return LpCase(family, vocab, tuple(seeds[:large_vocab_max_batch() if vocab >= 32000 else 3]), n_choice)
    return st.builds(build, st.sampled_from(families), vocab_sizes(),
                     st.sampled_from(N_CHOICES), st.lists(st.integers(0, 2**16), min_size=1, max_size=3))


# --- the model -----------------------------------------------------------------------------------

@dataclass(frozen=True)
class Exact:
    lp: np.ndarray
    """float64 log-softmax of each row as given [B, V] (-inf where masked)."""
    scale: np.ndarray
    bound: np.ndarray
    """``log_softmax_model``'s scale and bound (u): the allowance is u·scale·bound absolute."""

    @property
    def allowance(self) -> np.ndarray:
        return U32 * self.scale * self.bound + FTZ_FLOOR


def exact(x32: np.ndarray) -> Exact:
    x32 = np.asarray(x32, dtype=np.float32)
    lp = np.stack([olp.logprobs(r.astype(np.float64), "raw") for r in x32])
    case = OpCase("log_softmax", "float32", "logprobs", 0, {"rows": x32.shape[0], "n": x32.shape[1]}, {}, {"x": x32})
    scale, bound = log_softmax_model(case, lp)
    return Exact(lp, scale, bound)


def fail(prop: str, case: Any, why: str, report: Any = None, category: str = "") -> None:
    """The logprob property ``prop`` said no on ``case`` (``report``: the error in u it measured)."""
    raise Failure(why, property=prop, record="logprobs", case=case, report=report, category=category)


def judge_values(prop: str, case: Any, got: np.ndarray, m: Exact, rows: np.ndarray, cols: np.ndarray,
                 what: str) -> None:
    """Returned logprobs at (rows, cols) against the model; -inf exactly where masked; 0.0 only at p = 1."""
    got = np.asarray(got, dtype=np.float64)
    ex, sc, bd = m.lp[rows, cols], m.scale[rows, cols], m.bound[rows, cols]
    if np.isnan(got).any():
        fail(prop, case, f"{what}: NaN logprob at {np.argwhere(np.isnan(got))[0].tolist()}")
    rep, _, why = scaled_error(got, ex, sc, bd)
    if why:
        fail(prop, case, f"{what}: {why}", rep)
    zero = got == 0.0
    if zero.any():
        gap = -np.expm1(ex[zero])  # 1 - p, exactly
        over = gap > m.allowance[rows, cols][zero]
        if over.any():
            j = np.argwhere(zero)[int(np.flatnonzero(over)[0])].tolist()
            fail(prop, case, f"{what}: logprob 0.0 (p = 1) at {j}, but 1 - p = {gap[over][0]:.4g}")
    only = np.isfinite(m.lp).sum(axis=1)[rows] == 1
    bad = only & np.isfinite(ex) & (got != 0.0)
    if bad.any():
        j = np.argwhere(bad)[0].tolist()
        fail(prop, case, f"{what}: the row's only finite token has p = 1, logprob {got[tuple(j)]!r}, not 0.0")


def judge_top_n(prop: str, case: Any, x32: np.ndarray, n: int, ids: Any, lps: Any, m: Exact) -> None:
    ids, lps = np.asarray(ids), np.asarray(lps)
    B, V = x32.shape
    if ids.shape != (B, n) or lps.shape != (B, n):
        fail(prop, case, f"shapes {ids.shape}, {lps.shape}: expected ({B}, {n}) each", category="contract")
    if not np.issubdtype(ids.dtype, np.integer):
        fail(prop, case, f"ids are {ids.dtype}, not integers")
    if ((ids < 0) | (ids >= V)).any():
        fail(prop, case, f"invalid ids (outside [0, {V})): {ids[(ids < 0) | (ids >= V)][:8].tolist()}")
    rows = np.repeat(np.arange(B), n).reshape(B, n)
    for b in range(B):
        if np.unique(ids[b]).size != n:
            u, c = np.unique(ids[b], return_counts=True)
            fail(prop, case, f"row {b}: duplicate ids {u[c > 1][:8].tolist()} in the top {n}")
    judge_values(prop, case, lps, m, rows, ids, f"top-{n} logprobs")
    x = x32.astype(np.float64)
    win = m.allowance
    for b in range(B):
        got = ids[b]
        before = lambda a, c: x[b, a] > x[b, c]  # noqa: E731  (equal values, -inf included: a tie, either order)
        def near(a, c):  # both finite and within their allowances (-inf - -inf is NaN: not near)
            with np.errstate(invalid="ignore"):
                return (np.isfinite(x[b, a]) & np.isfinite(x[b, c])
                        & (np.abs(m.lp[b, a] - m.lp[b, c]) <= win[b, a] + win[b, c]))
        if n > 1:
            a, c = got[:-1], got[1:]
            wrong = before(c, a) & ~near(a, c)
            if wrong.any():
                j = int(np.flatnonzero(wrong)[0])
                fail(prop, case, f"row {b}: position {j} holds id {a[j]} (logit {x[b, a[j]]!r}) before id {c[j]} "
                                 f"(logit {x[b, c[j]]!r}): not logit descending")
            if (lps[b][:-1] < lps[b][1:]).any():
                fail(prop, case, f"row {b}: logprobs not sorted descending: {lps[b][:8].tolist()}")
        if 0 < n < V:
            rest = np.setdiff1d(np.arange(V), got)
            last = got[-1]
            skipped = before(rest, last) & ~near(rest, np.full(rest.size, last))
            if skipped.any():
                j = int(rest[np.flatnonzero(skipped)[0]])
                masked = not np.isfinite(x[b, last])
                fail(prop, case, f"row {b}: id {j} (logit {x[b, j]!r}) should be in the top {n} ahead of id {last} "
                                 f"(logit {x[b, last]!r})" + (": a masked id listed while a finite token is left out"
                                                              if masked and np.isfinite(x[b, j]) else ""))
        p = np.exp(np.asarray(lps[b], dtype=np.float64))
        slack = float((np.exp(m.lp[b, got]) * win[b, got]).sum()) + n * F32_TINY
        if p.sum() > 1 + slack:
            fail(prop, case, f"row {b}: the top {n} probabilities sum to {p.sum():.9g} > 1 (+{slack:.3g})")


# --- property bodies -------------------------------------------------------------------------

def check_top_n(sub, case: LpCase) -> None:
    ids, lps = sub("logprobs_top_n", case.logits.copy(), case.n)
    judge_top_n("top_n", case, case.logits, case.n, ids, lps, exact(case.logits))


def check_logprob_of(sub, case: LpCase) -> None:
    got = np.asarray(sub("logprobs_of", case.logits.copy(), case.ids.copy()))
    if got.shape != (case.logits.shape[0],):
        fail("logprob_of", case, f"shape {got.shape}, expected ({case.logits.shape[0]},)")
    m = exact(case.logits)
    judge_values("logprob_of", case, got, m, np.arange(got.size), case.ids, "logprob of the given token")


ENGINE_CHAINS = ("vllm", "transformers", "llama.cpp")


@dataclass
class ProcessedCase:
    base: LpCase
    engine: str
    t: float
    top_k: int
    top_p: float
    min_p: float

    def chain(self, sub, x: np.ndarray) -> np.ndarray:
        B = x.shape[0]
        full = lambda v: np.full(B, v)  # noqa: E731
        if self.engine == "vllm":
            empty = np.full((B, 0), -1, dtype=np.int64)
            return sub("vllm_chain", x, empty, empty, full(1.0), full(0.0), full(0.0), full(self.t), full(self.min_p),
                       np.full(B, self.top_k, dtype=np.int64), full(self.top_p))
        if self.engine == "transformers":
            return sub("hf_chain", x, np.full((B, 0), -1, dtype=np.int64), full(1.0), full(self.t),
                       np.full(B, self.top_k, dtype=np.int64), full(self.top_p), full(self.min_p))
        return sub("llama_cpp_chain", x, np.full((B, 0), -1, dtype=np.int64), np.zeros(B, dtype=np.int64), full(1.0),
                   full(0.0), full(0.0), np.full(B, self.top_k, dtype=np.int64), full(self.top_p),
                   full(self.min_p), full(self.t))


def processed_cases() -> st.SearchStrategy[ProcessedCase]:
    fams = tuple(f for f in FAMILY_NAMES if f not in ("huge",))  # temperatures of 1e30 logits: the chains' domain
    return st.builds(ProcessedCase, cases(fams), st.sampled_from(ENGINE_CHAINS), st.sampled_from([1.0, 1.0, 0.7, 1.5]),
                     st.sampled_from([0, 1, 2, 5, 40]), st.sampled_from([1.0, 0.9, 0.5]),
                     st.sampled_from([0.0, 0.05, 0.2]))


def check_processed(sub, case: ProcessedCase) -> None:
    """Processed logprobs = log-softmax of the chain's output; at t = 1, raw shifted by the survivors' mass."""
    x = case.base.logits
    y = np.asarray(case.chain(sub, x.copy()), dtype=np.float32)
    B, V = x.shape
    n = case.base.n
    m_proc = exact(y)
    dropped = np.isfinite(x) & ~np.isfinite(y)
    rng = np.random.default_rng(case.base.seeds[0] + 11)
    ids = case.base.ids.copy()
    for b in range(B):  # ask for a dropped token when there is one, half the time
        if dropped[b].any() and rng.random() < 0.5:
            ids[b] = int(rng.choice(np.flatnonzero(dropped[b])))
    proc = np.asarray(sub("logprobs_of", y.copy(), ids.copy()), dtype=np.float64)
    judge_values("processed", case, proc, m_proc, np.arange(B), ids, "processed logprob (chain output's log-softmax)")
    top_ids, top_lps = sub("logprobs_top_n", y.copy(), n)
    judge_top_n("processed", case, y, n, top_ids, top_lps, m_proc)
    if case.t != 1.0:
        return
    m_raw = exact(x)
    both = np.concatenate([ids[:, None], np.asarray(top_ids)[:, :1]], axis=1) if n else ids[:, None]
    for col in range(both.shape[1]):
        tok = both[:, col].astype(np.int64)
        raw = np.asarray(sub("logprobs_of", x.copy(), tok.copy()), dtype=np.float64)
        pr = proc if col == 0 else np.asarray(top_lps, dtype=np.float64)[:, 0]
        for b in range(B):
            i = int(tok[b])
            if not np.isfinite(y[b, i]):
                continue
            if y[b, i] != x[b, i]:
                fail("processed", case, f"row {b}: a chain at t = 1 with no penalties changed survivor {i}'s logit "
                                        f"{x[b, i]!r} to {y[b, i]!r}")
            shift = olp.surviving_mass_shift(x[b].astype(np.float64), y[b].astype(np.float64))
            gap = abs((pr[b] - raw[b]) - shift)
            allowed = m_proc.allowance[b, i] + m_raw.allowance[b, i]
            if not gap <= allowed:
                fail("processed", case, f"row {b}, token {i}: processed {pr[b]!r} - raw {raw[b]!r} = "
                                        f"{pr[b] - raw[b]:.9g}, but -ln(surviving mass) = {shift:.9g} "
                                        f"({gap / U32:.3g} u off, allowed {allowed / U32:.3g} u)")


def _lp_property(name: str, draw: Callable[[], st.SearchStrategy], body: Callable[[Any, Any], None],
                 uses: frozenset[str]) -> Property:
    """A logprob property: judged at one point (its draw varies engines and rows itself)."""
    return Property(name, lambda point, **scope: draw(), lambda impl, point, case: body(impl, case), uses)


PROPERTIES = (
    _lp_property("top_n", cases, check_top_n, frozenset({"logprobs_top_n"})),
    _lp_property("logprob_of", cases, check_logprob_of, frozenset({"logprobs_of"})),
    _lp_property("processed_vs_raw", processed_cases, check_processed,
               frozenset({"logprobs_of", "logprobs_top_n", "vllm_chain", "hf_chain", "llama_cpp_chain"})),
)
