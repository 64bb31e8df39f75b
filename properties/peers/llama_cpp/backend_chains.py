"""Generated sampler chains through llama.cpp's backend: a graph prefix, a CPU suffix, a seeded dist.

A ``ChainCase`` is a grid-snapped float32 row (every transform is then exact in float32), a
penalties history, and a chain of (factory name, parameters) members that both
``oracle.samplers`` and ``properties.peers.llama_cpp.adapter`` build. ``check_backend_chain`` judges one
case against four references and raises ``Failure`` naming the first that breaks:

1. truncation ≡ masking: the backend prefix's masked row describes the distribution of the
   truncating oracle prefix (support exactly, unless a filter boundary was ambiguous);
2. the hand-off: ``llama_sampler_sample``'s token equals llama.cpp's own CPU samplers applied to
   the arrays the backend returned (llama.cpp's documented hand-off, replayed);
3. backend prefix + CPU suffix ≡ the whole chain: against the oracle chain, and against llama.cpp's
   all-CPU chain on the raw row;
4. the seeded token is one the final array's inverse CDF may give for the seed's uniform.

``subs`` swaps oracle members for models of what the backend is documented to do (the findings
of ``backend_explain``); ``backend_explain.explain`` finds the smallest set that explains a failure.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from hypothesis import strategies as st

from oracle.candidates import TokenDataArray
from oracle.rng import Mt19937
from properties.samplers.records import RECORDS, RECORDS_BY_NAME
from properties.samplers.chains import compare
from properties.failure import Failure
from properties.numerics import mass_allowance
from properties.peers.llama_cpp import adapter as peer, backend_sampling as bs
from properties.peers.llama_cpp.backend_explain import (LastMaxMask, NaNEntropyDomain, StrictMinP, TruncateToMax,
                                                        TypicalNaNEntropy)
from properties.samplers.strategies import FAMILIES, make_logits, vocab_sizes

BACKEND_MEMBERS = tuple(r.name for r in RECORDS if r.llama is not None and r.llama.backend_chain == "prefix")
SUFFIX_MEMBERS = tuple(r.name for r in RECORDS if r.llama is not None and r.llama.backend_chain == "suffix")
SUBSTITUTIONS = ("last-maximum-tie", "backend-top-p-ignores-min-keep", "backend-min-p-ignores-min-keep",
                 "backend-min-p-strict-threshold", "backend-temp-zero-truncates",
                 "backend-logit-bias-repeated-token-last-wins", "typical-nan-entropy", "xtc-counts-masked-handoff")


@dataclass
class ChainCase:
    row: np.ndarray  # float32 [V]
    steps: list  # [(name, params)] without the final dist
    history: list = field(default_factory=list)
    seed: int = 0
    origin: str = ""  # how the row was made (family, row seed), for the replay recipe

    def __repr__(self) -> str:
        shown = [f"{n}{p}" for n, p in self.steps]
        return f"ChainCase({self.origin}vocab={self.row.size}, steps={shown}, history={self.history}, seed={self.seed})"

    @property
    def vocab(self) -> int:
        return int(self.row.size)

    def peer_steps(self) -> list:
        return list(self.steps) + [("dist", {"seed": self.seed})]


_BIAS_EIGHTHS = st.integers(-16, 16).map(lambda i: i / 8)


def _member(name: str, vocab: int) -> st.SearchStrategy[dict]:
    """Every legal parameter shape: no-op points, zero, negative, beyond-range values."""
    return RECORDS_BY_NAME[name].llama.backend_params(vocab)


@st.composite
def chain_cases(draw, max_vocab: int = 4096) -> ChainCase:
    vocab = draw(vocab_sizes(max_vocab, 2), label="vocab")
    family = draw(st.sampled_from([f for f in FAMILIES if f not in ("huge", "past_fp16")]), label="family")
    row_seed = draw(st.integers(0, 2**16), label="row seed")
    row = make_logits(family, vocab, row_seed).astype(np.float64)
    row = np.where(np.isfinite(row), np.clip(np.round(row * 256) / 256, -64, 64), -np.inf).astype(np.float32)
    steps = []
    if draw(st.booleans(), label="logit_bias first"):  # where common_sampler puts it
        biases = draw(st.lists(st.tuples(st.integers(0, vocab - 1), st.one_of(_BIAS_EIGHTHS, st.just(-np.inf))),
                               min_size=1, max_size=4), label="biases")
        steps.append(("logit_bias", {"n_vocab": vocab, "biases": biases}))
    names = draw(st.lists(st.sampled_from(BACKEND_MEMBERS), max_size=4), label="backend members")
    names += draw(st.lists(st.sampled_from(SUFFIX_MEMBERS), max_size=2, unique=True), label="cpu suffix")
    steps += [(n, draw(_member(n, vocab), label=n)) for n in names]
    history = draw(st.lists(st.integers(0, vocab - 1), max_size=8), label="history")
    return ChainCase(row, steps, history, draw(st.integers(0, 2**16), label="dist seed"), f"{family}/{row_seed}, ")


def oracle_member(name: str, params: dict, subs: frozenset = frozenset(), on_backend: bool = False):
    kw = {k: v for k, v in params.items() if not (name == "penalties" and k == "n_vocab")}
    if on_backend and name == "temp" and params["t"] <= 0 and "backend-temp-zero-truncates" in subs:
        return TruncateToMax(last="last-maximum-tie" in subs)
    if on_backend and name == "temp" and params["t"] <= 0 and "last-maximum-tie" in subs:
        return LastMaxMask()
    if name == "typical" and "typical-nan-entropy" in subs:
        return TypicalNaNEntropy(params["p"], params["min_keep"])
    if on_backend and name == "logit_bias" and "backend-logit-bias-repeated-token-last-wins" in subs:
        kw["biases"] = list(dict(params["biases"]).items())
    if on_backend and name == "min_p" and "backend-min-p-strict-threshold" in subs:
        return StrictMinP(params["p"])
    if on_backend and name in ("top_p", "min_p") and f"backend-{name.replace('_', '-')}-ignores-min-keep" in subs:
        kw["min_keep"] = 0
    return RECORDS_BY_NAME[name].build(kw, params.get("n_vocab", 0))


def _bracket_params(name: str, params: dict) -> dict:
    if name == "xtc":
        return {**params, "chance": Mt19937(params["seed"]).uniform_float()}
    return params


def oracle_chain(cc: ChainCase, upto: int, n_backend: int, subs: frozenset,
                 handoff_ids: np.ndarray | None = None) -> tuple[TokenDataArray, bool]:
    """The oracle over ``cc.steps[:upto]`` on the whole row (as llama.cpp, which hands every entry,
    -inf ones included, to its CPU samplers), and whether a filter boundary on the way was
    ambiguous (its must/may bracket differs)."""
    members = [oracle_member(n, p, subs, i < n_backend) for i, (n, p) in enumerate(cc.steps[:upto])]
    for m in members:
        for t in cc.history:
            m.accept(int(t))
    cur = TokenDataArray.from_logits(cc.row.astype(np.float64))
    ambiguous = False
    for i, ((name, params), m) in enumerate(zip(cc.steps[:upto], members)):
        if i == n_backend and handoff_ids is not None and "xtc-counts-masked-handoff" in subs:
            # the backend hands over a fixed-shape masked array: its ids, -inf where it masked
            cur = _state(handoff_ids, cur.dense_logits(cc.vocab)[handoff_ids], np.zeros(handoff_ids.size))
        rec = RECORDS_BY_NAME[name]
        if rec.kind == "filter" and np.isfinite(cur.logits).any():
            must, may = rec.must_may(cur.dense_logits(cc.vocab), _bracket_params(name, params), truncated=True)
            ambiguous |= not np.array_equal(must, may)
        if name in ("temp", "temp_ext") and params["t"] <= 0 and np.isfinite(cur.logits).any():
            top = cur.logits[np.isfinite(cur.logits)]
            ambiguous |= int((top == top.max()).sum()) > 1  # which of equal maxima survives is a tie rule
        before = cur.dense_logits(cc.vocab)
        m.apply(cur)
        if rec.kind == "filter":
            after = np.isfinite(cur.dense_logits(cc.vocab))
            dropped = np.isfinite(before) & ~after
            # a filter that ranks by logit cut between equal logits: which of them survive is a tie rule
            ambiguous |= bool(np.isin(before[dropped], before[after]).any())
    return cur, ambiguous


def _state(ids, logits, p) -> TokenDataArray:
    return TokenDataArray(np.asarray(ids, dtype=np.int64), np.asarray(logits, dtype=np.float64),
                          np.asarray(p, dtype=np.float64))


def _distribution(cur: TokenDataArray, vocab: int) -> np.ndarray | None:
    return cur.distribution(vocab) if cur.size and np.isfinite(cur.logits).any() else None


def _same(got: np.ndarray | None, want: np.ndarray | None, ambiguous: bool) -> str | None:
    if got is None or want is None:
        return None if (got is None) == (want is None) else f"one side keeps no token (got {got is not None})"
    return compare(got, want, ambiguous)


def _cpu_apply(steps, cur: TokenDataArray, history=()) -> TokenDataArray:
    """llama.cpp's own CPU samplers, one by one, on ``cur`` (a fresh sampler per member)."""
    for name, params in steps:
        with getattr(peer, name)(**params) as smp:
            for t in history:
                smp.accept(int(t))
            out = smp.apply(cur)
        cur = TokenDataArray(out.ids, out.logits.astype(np.float64), out.p.astype(np.float64), out.sorted, out.selected)
    return cur


def inverse_cdf_legal(ids: np.ndarray, p: np.ndarray, u: float) -> np.ndarray:
    """Token ids the inverse CDF of ``p`` (in array order) may give at u, within the float32
    prefix-sum allowance: the backend sums ``ggml_cumsum`` in float and compares with float(u)."""
    p = np.asarray(p, dtype=np.float64)
    cdf = np.cumsum(p) / p.sum()
    lo = np.concatenate([[0.0], cdf[:-1]])
    d = mass_allowance(p.size, p.size)
    return ids[(p > 0) & (lo <= u + d) & (cdf >= u - d)]


@dataclass
class ChainReport:
    backend_members: int = 0
    suffix_members: int = 0
    same_seeded_token: bool | None = None  # vs llama.cpp's all-CPU chain (None: not comparable)
    same_order: bool | None = None  # the final arrays list the same ids in the same order
    abort: str = ""
    suffix_judged: bool = True


def check_backend_chain(cc: ChainCase, subs: frozenset = frozenset()) -> ChainReport:
    def fail(what: str, why: str) -> None:
        raise Failure(why, property=f"backend chain [{what}]", record="backend chain", case=cc)

    steps, vocab = cc.peer_steps(), cc.vocab
    rep = ChainReport()
    why = bs.abort_reason(steps, vocab)
    if why:
        raise bs.BackendAbort(why)
    n_backend = bs.backend_prefix(steps)
    rep.backend_members, rep.suffix_members = min(n_backend, len(cc.steps)), len(steps) - n_backend
    r = bs.run(cc.row[None, :], [steps], histories=[cc.history], sample=True)[0]
    prefix = min(n_backend, len(cc.steps))
    want, amb_prefix = oracle_chain(cc, prefix, n_backend, subs)
    hand = _state(r.ids, r.logits, r.probs if r.probs is not None else np.zeros(r.ids.size))
    why = _same(_distribution(hand, vocab), _distribution(want, vocab), amb_prefix)
    if why:
        fail("truncation ≡ masking", f"backend prefix of {prefix} members vs the truncating oracle: {why}")
    final = _cpu_apply(cc.steps[prefix:], hand)
    if n_backend <= len(cc.steps):  # dist ran on the CPU: replay the documented hand-off
        with peer.dist(cc.seed) as d:
            out = d.apply(final)
        replay = int(out.ids[out.selected]) if 0 <= out.selected < out.ids.size else None
        if replay != r.cpu_token:
            fail("hand-off", f"llama_sampler_sample gave {r.cpu_token}, the CPU suffix on the backend's arrays {replay}")
    try:
        whole, amb_all = oracle_chain(cc, len(cc.steps), n_backend, subs, r.ids)
    except NaNEntropyDomain:
        rep.suffix_judged = False
        return rep
    why = _same(_distribution(final, vocab), _distribution(whole, vocab), amb_all)
    if why:
        fail("prefix + suffix ≡ oracle chain", why)
    cpu = _cpu_apply(cc.steps, _state(np.arange(vocab), cc.row, np.zeros(vocab)), cc.history)
    if not subs:
        why = _same(_distribution(final, vocab), _distribution(cpu, vocab), amb_all)
        if why:
            fail("prefix + suffix ≡ all-CPU llama.cpp chain", why)
    token = r.token if r.token is not None else r.cpu_token
    if np.isfinite(final.logits).any():
        u = Mt19937(cc.seed).uniform_double()
        p = np.where(np.isfinite(final.logits), np.exp(final.logits - final.logits[np.isfinite(final.logits)].max()), 0.0)
        legal = inverse_cdf_legal(final.ids, p, u)
        if token not in legal:
            fail("seeded token", f"token {token} is not what the final array's inverse CDF gives at u = {u:.9f}")
        with peer.chain([getattr(peer, n)(**p) for n, p in steps]) as whole_cpu:
            for t in cc.history:
                whole_cpu.accept(int(t))
            cpu_token = whole_cpu.sample(cc.row)
        rep.same_seeded_token = cpu_token == token
        rep.same_order = np.array_equal(final.ids[np.isfinite(final.logits)], cpu.ids[np.isfinite(cpu.logits)])
        if not subs and rep.same_order and not rep.same_seeded_token and cpu_token not in legal:
            fail("seeded token", f"same final array, same seed: backend+CPU {token}, all-CPU {cpu_token}, "
                                 f"and u = {u:.9f} is not at a CDF boundary")
    return rep


def judge_chain(cc: ChainCase) -> tuple[ChainReport, list[str]]:
    """``check_backend_chain`` as it is, else with the fewest documented substitutions that make it
    pass (the classes), else the original failure."""
    try:
        return check_backend_chain(cc), []
    except bs.BackendAbort as exc:
        return ChainReport(abort=exc.args[0]), [exc.args[0]]
    except Failure as exc:
        first = exc
    full = frozenset(SUBSTITUTIONS)
    try:
        check_backend_chain(cc, full)
    except Failure:
        raise first
    needed = set(full)
    for sub in SUBSTITUTIONS:
        trial = frozenset(needed - {sub})
        if not trial:
            continue
        try:
            check_backend_chain(cc, trial)
            needed = set(trial)
        except Failure:
            pass
    return check_backend_chain(cc, frozenset(needed)), sorted(needed)


__all__ = ["ChainCase", "ChainReport", "chain_cases", "check_backend_chain", "judge_chain"]
