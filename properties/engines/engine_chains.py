"""transformers' and vLLM's whole chains (``engines.hf_chain``, ``engines.vllm_chain``) judged
against the oracle chain built from the same engine's stage records: survivors vs the oracle
chain's, stage by stage.

The engine hands back only its final row, so the legal answer is composed (``legal_chain``): each
stage's record runs on every row an earlier stage may legally have produced (its ``variants``:
the float32 rounding windows; its ``key``: ties), giving per stage the tokens it must and may keep. The
engine's survivors must lie between the last stage's sets, and its surviving values within the
transforms' error models of the oracle's exact path (penalties, then one rounding of l / t).
A token the engine keeps is blamed on the first stage that drops it on every legal path.

Only this one function of the implementation is called per case: nothing else of the module
(softmax, the stage functions) is needed to judge its chain.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
from hypothesis import strategies as st

from properties.engines import legal_chain
from properties.engines.legal_chain import LegalChain, Stage, first_dropping_stage, nonfinite_output, worst_value
from properties.engines.records import ENGINE_RECORDS, _history, _ids, engines_impl
from properties.failure import Failure
from properties.numerics import F32_TINY, U32
from properties.samplers.record import Params
from properties.samplers.records import _dict, _prob
from properties.samplers.strategies import FAMILIES, Case, cases, per_row

MAX_VOCAB = 4096  # every stage runs each variant on each carried row
VLLM_GREEDY = 1e-5  # vLLM's _SAMPLING_EPS: below it a row keeps its first maximal logit only

_BY_NAME = {r.name: r for r in ENGINE_RECORDS}


@dataclass(frozen=True)
class EngineChain:
    """One engine's chain: its function, the draw of its per-row parameters, the call, and the
    stages (record, parameters) a row's parameters switch on, in the engine's order."""
    name: str
    impl_name: str
    params: Callable[[int, int], st.SearchStrategy[dict]]
    call: Callable[[Any, np.ndarray, dict], np.ndarray]
    stages: Callable[[Params], list[Stage]]
    greedy: Callable[[Params], bool] = lambda p: False

    def __repr__(self) -> str:
        return self.name


def _hf_stages(p: Params) -> list[Stage]:
    mk = p["min_keep"]
    on = [("transformers.repetition_penalty", p["rep"] != 1, {"history": p["history"], "r": p["rep"]}),
          ("transformers.temperature", p["t"] != 1, {"t": p["t"]}),
          ("transformers.top_k", p["k"] > 0, {"k": p["k"], "min_keep": mk}),
          ("transformers.top_p", p["p"] < 1, {"p": p["p"], "min_keep": mk}),
          ("transformers.min_p", p["m"] > 0, {"p": p["m"], "min_keep": mk}),
          ("transformers.typical", p["typ"] < 1, {"p": p["typ"], "min_keep": mk}),
          ("transformers.epsilon", p["eps"] > 0, {"eps": p["eps"], "min_keep": mk}),
          ("transformers.eta", p["eta"] > 0, {"eps": p["eta"], "min_keep": mk})]
    return [Stage(_BY_NAME[n], q) for n, active, q in on if active]


def _vllm_stages(p: Params) -> list[Stage]:
    """vLLM: penalties, l / t (the same float32 division as transformers' warper), min_p, then
    top_k and top_p together."""
    on = [("vllm.penalties", True, {"prompt": p["prompt"], "output": p["output"], "r": p["rep"], "f": p["f"],
                                    "pr": p["pr"]}),
          ("transformers.temperature", p["t"] != 1, {"t": p["t"]}),
          ("vllm.min_p", p["m"] > 0, {"p": p["m"]}),
          ("vllm.top_k_top_p", 0 < p["k"] < p["n_vocab"] or p["p"] < 1, {"k": p["k"], "p": p["p"]})]
    return [Stage(_BY_NAME[n], q) for n, active, q in on if active]


def _rep(b: int) -> st.SearchStrategy[np.ndarray]:
    return per_row(_prob((1.0, 1.1, 0.8), 0.5, 2.0), b)


def _hf_params(b: int, v: int) -> st.SearchStrategy[dict]:
    return _dict(history=_history(b, v), rep=_rep(b), t=per_row(_prob((1.0, 0.8, 0.5, 1.5), 0.25, 4.0), b),
                 k=per_row(st.sampled_from([0, 1, 2, 5, 40]), b, np.int64),
                 p=per_row(_prob((1.0, 0.95, 0.8, 0.5), 0.0, 1.0), b),
                 m=per_row(_prob((0.0, 0.05, 0.2), 0.0, 1.0), b), typ=per_row(_prob((1.0, 0.9, 0.5), 0.01, 1.0), b),
                 eps=per_row(_prob((0.0, 3e-4, 0.02), 1e-5, 0.5), b), eta=per_row(_prob((0.0, 3e-4, 0.02), 1e-5, 0.5), b),
                 min_keep=per_row(st.sampled_from([1, 1, 2, 3]), b, np.int64))


def _vllm_params(b: int, v: int) -> st.SearchStrategy[dict]:
    return _dict(prompt=_history(b, v), output=_history(b, v), rep=_rep(b),
                 f=per_row(_prob((0.0, 0.5, -0.5), -2.0, 2.0), b), pr=per_row(_prob((0.0, 0.25), -2.0, 2.0), b),
                 t=per_row(_prob((1.0, 0.8, 0.0, 1.5), 0.25, 4.0), b),
                 m=per_row(_prob((0.0, 0.05, 0.2), 0.0, 1.0), b),
                 k=per_row(st.sampled_from([-1, 0, 1, 2, 5, 40]), b, np.int64),
                 p=per_row(_prob((1.0, 0.95, 0.8, 0.5), 0.0, 1.0), b))


CHAINS = (
    EngineChain("transformers.chain", "hf_chain", _hf_params,
                lambda i, x, p: engines_impl(i)("hf_chain", x, p["history"], p["rep"], p["t"], p["k"], p["p"], p["m"],
                                                p["typ"], p["eps"], p["eta"], p["min_keep"]), _hf_stages),
    EngineChain("vllm.chain", "vllm_chain", _vllm_params,
                lambda i, x, p: engines_impl(i)("vllm_chain", x, p["prompt"], p["output"], p["rep"], p["f"], p["pr"],
                                                p["t"], p["m"], p["k"], p["p"]),
                _vllm_stages, greedy=lambda p: p["t"] < VLLM_GREEDY),
)


CHAIN_FAMILIES = tuple(f for f in FAMILIES if f != "near_ties")
"""Rows of many values a few ulps apart leave a stage a choice among hundreds of near-tied
tokens; which one the engine took decides the next stage's row, and the composition carries
at most ``legal_chain.MAX_PATHS`` of those rows (measured: 2-6 % false alarms on near_ties rows). They stay
judged stage by stage (``test_engine_impl_matches_oracle``)."""


def chain_cases(chain: EngineChain) -> st.SearchStrategy[Case]:
    return cases(chain.params, families=CHAIN_FAMILIES, max_vocab=MAX_VOCAB, max_batch=4)


def _corner(name: str, probs: list[float], **params: Any) -> Case:
    row = np.log(np.asarray(probs, dtype=np.float64)).astype(np.float32)
    arrays = {k: np.asarray([v]) if np.ndim(v) == 0 else np.asarray([v]) for k, v in params.items()}
    return Case(f"corner: {name}", row.size, "float32", (0,), arrays, row[None, :])


def chain_corners(chain: EngineChain) -> tuple[Case, ...]:
    """Rows where swapping two adjacent stages changes the survivors, visited before the draws
    (hypothesis' first draws are its simplest: no interplay)."""
    if chain.impl_name == "hf_chain":
        # top_k then top_p: [0.4, 0.35] renormalised keeps one token at p = 0.5; top_p first keeps two
        return (_corner("top_k before top_p", [0.4, 0.35, 0.25], history=np.full(1, -1), rep=1.0, t=1.0, k=2, p=0.5,
                        m=0.0, typ=1.0, eps=0.0, eta=0.0, min_keep=1),)
    # min_p first drops 0.05, so top_p's renormalised tail 0.158 <= 1 - 0.83 goes too
    return (_corner("min_p before top_p", [0.5, 0.3, 0.15, 0.05], prompt=np.full(1, -1), output=np.full(1, -1),
                    rep=1.0, f=0.0, pr=0.0, t=1.0, m=0.2, k=-1, p=0.83),)


def _near_ties(x: np.ndarray, stage: Stage, must: np.ndarray, may: np.ndarray, err: float
               ) -> tuple[np.ndarray, np.ndarray]:
    """After a transform, the engine's filter sees values within ``err`` of the exact path's: two
    tokens within 2·err (in the filter's ranking key, logits or typicality) may be ordered either
    way, so the bracket's tie expansion widens by that much (``brackets.bracket``'s rule)."""
    if err <= 0:
        return must, may
    from properties.samplers.brackets import bracket

    key, eps = stage.record.key(x, stage.params) if stage.record.key else (x, 0.0)
    m2, y2 = bracket([must, may], key, eps + 2 * err)
    return must & m2, may | y2


def _zero_ties(x: np.ndarray, must: np.ndarray, may: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Tokens whose float32 probability on this row underflows to 0 are one tie class for the
    stages that decide on probabilities (a ``min_keep`` restore among them picks any): if one of
    them may survive, each may, and none must."""
    fin = np.isfinite(x)
    if not fin.any():
        return must, may
    zero = fin & (np.exp(x - x[fin].max()) < F32_TINY)
    if (zero & may).any():
        return must & ~zero, may | zero
    return must, may


def _engine_ties(hint: np.ndarray | None) -> legal_chain.Widen:
    """transformers' and vLLM's filters widened by the near ties a transform's error makes and by
    the underflowed tie class, each carried on as one more path; with ``hint`` (the engine's final
    survivors), also the row whose undecided tokens (ties, windows) are resolved as the engine's
    answer shows."""
    def widen(stage: Stage, x: np.ndarray, must: np.ndarray, may: np.ndarray, err: float
              ) -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
        m0, y0 = _near_ties(x, stage, must, may, err)
        m_, y_ = _zero_ties(x, m0, y0)
        extra = []
        if not np.array_equal(y_, y0):  # the underflowed tie class carried on as one more path
            extra.append(np.where(y_, x, -np.inf))
        if hint is not None and not np.array_equal(m_, y_):
            # the tie choice the engine's answer shows: its survivors among the undecided
            extra.append(np.where(m_ | (y_ & hint), x, -np.inf))
        return m_, y_, extra
    return widen


def compose(row64: np.ndarray, stages: list[Stage], hint: np.ndarray | None = None) -> LegalChain:
    """Must/may survivor sets after each stage, over the legal paths through the chain (see
    ``_engine_ties`` for ``hint``)."""
    return legal_chain.compose(row64, stages, widen=_engine_ties(hint))


def _greedy(row64: np.ndarray, stages: list[Stage]) -> LegalChain:
    """vLLM below its sampling epsilon: the first maximum of the penalised row; maxima within the
    penalties' float32 error of each other are interchangeable."""
    pen = stages[0]
    y = pen.record.run_oracle(row64, pen.params).dense_logits(row64.size)
    bound = pen.record.transform_bound_u(row64, pen.params)
    top = float(np.max(y))
    slack = 2 * float(np.max(np.where(np.isfinite(y), bound * U32 * np.abs(y), 0))) + F32_TINY
    may = np.isfinite(y) & (y >= top - slack)
    must = may if may.sum() == 1 else np.zeros_like(may)
    final = np.where(may, y, -np.inf)
    return LegalChain([must], [may], [final], [bound])


def violation(chain: EngineChain, out: np.ndarray, row64: np.ndarray, params: Params) -> str | None:
    """Why the engine's final row ``out`` is not a legal result of its chain, or None."""
    stages = chain.stages(params)
    c = _greedy(row64, stages) if chain.greedy(params) else compose(row64, stages, np.isfinite(out))
    names = [s.record.name for s in stages] or ["(no stage active)"]
    why = nonfinite_output(out)
    if why:
        return why
    kept = np.isfinite(out)
    dropped = first_dropping_stage(kept, c.may)
    if dropped:
        i, extra = dropped
        return (f"stage {i + 1} ({names[i] if not chain.greedy(params) else 'greedy'}) drops {extra.size} "
                f"token(s) the engine kept, e.g. ids {extra[:6].tolist()} (after it: must={int(c.must[i].sum())}, "
                f"may={int(c.may[i].sum())}, engine kept {int(kept.sum())})")
    missing = np.flatnonzero(c.must[-1] & ~kept)
    if missing.size:
        return (f"the engine dropped {missing.size} token(s) every legal path of {' -> '.join(names)} keeps, e.g. "
                f"ids {missing[:6].tolist()} (must={int(c.must[-1].sum())}, may={int(c.may[-1].sum())}, engine kept "
                f"{int(kept.sum())})")
    bound_u = c.bound_u[-1]  # every transform's model along the exact path
    j = worst_value(out, c.final, bound_u + 3)
    if j is not None:
        return (f"token {j}'s final logit is {out[j]!r}, the oracle's {c.final[j]!r} (allowed "
                f"{bound_u[j] + 3:.3g} u: the transforms' models and the division by t)")
    return None


def check_chain(impl: Any, chain: EngineChain, case: Case) -> None:
    out = np.asarray(chain.call(impl, case.logits, case.params))
    if out.shape != case.logits.shape:
        raise Failure(f"returned shape {out.shape}, expected {case.logits.shape}", property="chain survivors",
                      record=chain.impl_name, case=case, category="contract")
    for b in range(case.batch):
        p = {**case.row_params(b), "n_vocab": case.vocab}
        why = violation(chain, out[b], case.row64(b), p)
        if why:
            raise Failure(why, property="chain survivors vs the oracle chain", record=chain.impl_name, case=case, row=b)
