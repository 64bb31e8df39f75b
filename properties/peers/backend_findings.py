"""Findings in llama.cpp's backend (ggml-graph) samplers, each a minimal witness replayed against the
real llama.cpp (llama-cpp-python 0.3.36, CPU backend, logit-injection models).

Plain data for ``findings.Finding`` (findings.py builds them; this module does not import it,
so either can be imported first).

A ``Witness`` is data: the row, the chain (factory names and parameters, the same for the backend,
llama.cpp's CPU samplers and the oracle), a penalties history. ``replay`` runs it on the backend
(aborting witnesses in a child process) and the oracle; ``properties.peers.reproducers`` renders the
same witness as a stand-alone script. The findings join ``findings.FINDINGS``, so
``test_finding_still_reproduces`` fails, naming the finding, the day upstream changes one.
"""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass

import numpy as np

from oracle import samplers as s
from oracle.candidates import TokenDataArray

NEG_INF = float("-inf")
SELECTORS = ("greedy", "dist", "mirostat", "mirostat_v2", "adaptive_p")


@dataclass(frozen=True)
class Witness:
    row: tuple
    steps: tuple  # ((name, params), ...)
    history: tuple = ()
    aborts: bool = False  # the backend call kills the process (GGML_ASSERT)
    reference: str = "oracle"  # "oracle", or "cpu": llama.cpp's own all-CPU chain (backend vs CPU findings)
    logit_of: int | None = None  # also report this token's final logit (rounded to 4 decimals)
    expected: str = ""  # the expected-vs-actual line's expectation, in words

    def steps_list(self) -> list:
        return [(n, dict(p)) for n, p in self.steps]


def backend_answer(w: Witness) -> dict:
    """What the backend chain returns: token, candidates, logits (None where it returned nothing)."""
    from properties.peers import backend_sampling as bs

    selects = w.steps[-1][0] in SELECTORS  # llama_sampler_sample asserts a selection: only then call it
    r = bs.run(np.asarray(w.row, dtype=np.float32)[None], [w.steps_list()], histories=[list(w.history)],
               sample=selects, guard=False)[0]
    token = r.token if r.token is not None else r.cpu_token
    return {"token": token, "candidates": None if r.candidates is None else r.candidates.tolist(),
            "logits": None if r.logits is None else [float(v) for v in r.logits]}


def backend_abort(w: Witness) -> dict:
    """Run the witness in a child process: {"killed_by_signal": bool, "assert": the GGML_ASSERT line}."""
    from properties.peers.llama_cpp import _REPO_ROOT

    proc = subprocess.run([sys.executable, "-m", "properties.peers.backend_findings", "--run", json.dumps(
        {"row": list(w.row), "steps": w.steps_list(), "history": list(w.history)})],
        cwd=_REPO_ROOT, capture_output=True, text=True, timeout=120)
    line = next((ln for ln in proc.stderr.splitlines() if "GGML_ASSERT" in ln), "")
    return {"killed_by_signal": proc.returncode < 0, "assert": line[line.find("GGML_ASSERT"):].strip()}


def oracle_answer(w: Witness) -> dict:
    """The oracle chain (llama.cpp's CPU semantics, float64): surviving ids in order, and the token
    a dist(seed) at the end selects."""
    try:
        cur = TokenDataArray.from_logits(np.asarray(w.row, dtype=np.float64))
    except ValueError as exc:
        return {"error": str(exc)}
    members = [getattr(s, n)(**{k: v for k, v in p.items() if not (n == "penalties" and k == "n_vocab")})
               for n, p in w.steps]
    for m in members:
        for t in w.history:
            m.accept(int(t))
    try:
        for m in members:
            m.apply(cur)
    except ValueError as exc:
        return {"error": str(exc)}
    kept = cur.ids[np.isfinite(cur.logits)]
    out = {"kept": kept.tolist()}
    if 0 <= cur.selected < cur.size:
        out["token"] = cur.selected_token
    if w.logit_of is not None:
        out[f"logit_of_token_{w.logit_of}"] = round(float(cur.logits[cur.ids == w.logit_of][0]), 4)
    return out


def cpu_answer(w: Witness) -> dict:
    """llama.cpp's all-CPU chain on the raw row: finite survivors in order, and the selected token."""
    from properties.peers import llama_cpp as peer

    with peer.chain([getattr(peer, n)(**p) for n, p in w.steps]) as chain:
        for t in w.history:
            chain.accept(int(t))
        out = chain.apply(np.asarray(w.row, dtype=np.float32))
    res = {"kept": out.ids[np.isfinite(out.logits)].tolist()}
    if 0 <= out.selected < out.ids.size:
        res["token"] = int(out.ids[out.selected])
    return res


def _finding(fid: str, sampler: str, description: str, witness_text: str, w: Witness, llama: dict,
             oracle: dict, pick=lambda d: d) -> dict:
    def replay() -> tuple[dict, dict]:
        got = backend_abort(w) if w.aborts else pick(backend_answer(w))
        return got, (cpu_answer(w) if w.reference == "cpu" else oracle_answer(w))
    WITNESSES[fid], PICKS[fid] = w, pick
    return {"id": fid, "sampler": sampler, "kind": "llama.cpp behaviour", "description": description,
            "witness": witness_text, "llama_output": llama, "oracle_output": oracle, "replay": replay}


WITNESSES: dict[str, Witness] = {}
PICKS: dict = {}  # finding id -> raw backend answer -> the recorded shape
_ROW5 = (0.0, 0.0, 0.0, 5.0, 4.0)
_TOKEN = lambda d: {"token": d["token"]}  # noqa: E731

BACKEND_FINDINGS: list[dict] = [
    _finding("backend-greedy-returns-position", "greedy (backend), after top_k or top_p",
             "The backend greedy graph is ggml_argmax over the current logits and does not map the index "
             "through the candidates tensor: after a backend top_k or top_p (which reorder and gather), it "
             "returns the POSITION of the best candidate as if it were a token id. Any token can come out.",
             "backend chain top_k(2) -> greedy on logits [0, 0, 0, 5, 4]",
             Witness(_ROW5, (("top_k", {"k": 2}), ("greedy", {})), expected="token 3 (logit 5)"),
             {"token": 1}, {"kept": [3, 4], "token": 3}, _TOKEN),
    _finding("backend-logit-bias-by-position", "logit_bias (backend), after top_p",
             "The backend logit_bias adds its biases at POSITIONS equal to the token ids. After a backend "
             "top_p (fixed shape, sorted by logit) position != token id, so the bias lands on another token "
             "or on a masked one and the biased token is untouched - the bias silently has no effect. "
             "(common_sampler puts logit_bias first, so only custom chains hit it.)",
             "backend chain top_p(0.9) -> logit_bias({4: +10}) -> dist(2) on logits [0, 0, 0, 5, 4]",
             Witness(_ROW5, (("top_p", {"p": 0.9, "min_keep": 0}), ("logit_bias", {"n_vocab": 5, "biases": [(4, 10.0)]}),
                             ("dist", {"seed": 2})), expected="token 4 (logit 4 + 10 = 14)"),
             {"token": 3, "logit_of_token_4": 4.0}, {"kept": [3, 4], "token": 4},
             lambda d: {"token": d["token"], "logit_of_token_4": d["logits"][d["candidates"].index(4)]}),
    _finding("backend-logit-bias-repeated-token-last-wins", "logit_bias (backend)",
             "A token listed twice gets only its LAST bias on the backend (ggml_set_rows overwrites); "
             "llama.cpp's CPU logit_bias adds both. A ban (-inf) followed by any other entry for the same "
             "token is lost on the backend.",
             "backend logit_bias({1: -inf, 1: +0.5}) -> dist(1) on logits [1, 2, 3, 4]",
             Witness((1.0, 2.0, 3.0, 4.0), (("logit_bias", {"n_vocab": 4, "biases": [(1, NEG_INF), (1, 0.5)]}),
                                            ("dist", {"seed": 1})), expected="token 1 masked (-inf)"),
             {"logits": [1.0, 2.5, 3.0, 4.0]}, {"kept": [0, 2, 3], "token": 3},
             lambda d: {"logits": d["logits"]}),
    _finding("backend-min-p-strict-threshold", "min_p (backend)",
             "The backend min_p keeps l > max + ln p (ggml_step is strict); the CPU keeps l >= max + ln p. "
             "At p = 1 (\"keep only the most probable\") the backend masks EVERY token, and a backend dist "
             "after it returns the last token id with NaN probabilities.",
             "backend chain min_p(1.0) -> dist(1) on logits [1, 3, 2, 3, 0.5, -1, 2.5, 0]",
             Witness((1.0, 3.0, 2.0, 3.0, 0.5, -1.0, 2.5, 0.0), (("min_p", {"p": 1.0, "min_keep": 0}), ("dist", {"seed": 1})),
                     expected="token 1 or 3 (the maxima)"),
             {"token": 7}, {"kept": [1, 3], "token": 3}, _TOKEN),
    _finding("backend-top-p-ignores-min-keep", "top_p (backend)",
             "The backend top_p graph has no min_keep: top_p(0, min_keep=3) keeps 1 token (CPU: 3).",
             "backend top_p(p=0, min_keep=3) on logits [0, 0.5, 1, 2, 3]",
             Witness((0.0, 0.5, 1.0, 2.0, 3.0), (("top_p", {"p": 0.0, "min_keep": 3}),), expected="3 survivors"),
             {"finite": 1}, {"kept": [4, 3, 2]},
             lambda d: {"finite": int(np.isfinite(d["logits"]).sum())}),
    _finding("backend-min-p-ignores-min-keep", "min_p (backend)",
             "The backend min_p graph has no min_keep: min_p(0.5, min_keep=4) keeps 2 tokens (CPU: 4).",
             "backend min_p(p=0.5, min_keep=4) on logits [0, 0.5, 1, 2.9, 3]",
             Witness((0.0, 0.5, 1.0, 2.9, 3.0), (("min_p", {"p": 0.5, "min_keep": 4}),), expected="4 survivors"),
             {"finite": 2}, {"kept": [4, 3, 2, 1]},
             lambda d: {"finite": int(np.isfinite(d["logits"]).sum())}),
    _finding("backend-temp-zero-truncates", "temp / temp_ext with t <= 0 (backend)",
             "temp(t <= 0) on the backend SHRINKS the array to the one maximal candidate; the CPU keeps every "
             "entry and sets the others to -inf. Samplers that count -inf entries then differ: here the CPU "
             "xtc(threshold 0) treats the masked tokens as 'top choices' and the CPU chain returns a masked "
             "token (2), while the backend hand-off has one candidate and returns the maximum (1).",
             "chain temp(0) [backend] -> xtc(1.0, 0.0, 0, seed 1) [CPU] -> dist(1) on logits [1, 3, 2, 0]",
             Witness((1.0, 3.0, 2.0, 0.0), (("temp", {"t": 0.0}), ("xtc", {"probability": 1.0, "threshold": 0.0,
                                                                          "min_keep": 0, "seed": 1}), ("dist", {"seed": 1})),
                     expected="the CPU chain's token, 2", reference="cpu"),
             {"token": 1}, {"kept": [], "token": 2}, _TOKEN),
    _finding("backend-temp-ext-zero-t-greedy", "temp_ext (backend)",
             "temp_ext(t <= 0, delta > 0) is greedy on the backend (one candidate) but a dynamic temperature "
             "in [0, delta] on the CPU, which keeps every token.",
             "backend temp_ext(t=0, delta=0.5, exponent=1) on logits [1, 3, 2, 0]",
             Witness((1.0, 3.0, 2.0, 0.0), (("temp_ext", {"t": 0.0, "delta": 0.5, "exponent": 1.0}),),
                     expected="4 survivors, logits scaled by 1/T"),
             {"candidates": [1]}, {"kept": [1, 2, 0, 3]}, lambda d: {"candidates": d["candidates"]}),
    _finding("backend-temp-ext-entropy-clamp", "temp_ext (backend)",
             "The backend temp_ext clamps p to [1e-10, 1] before summing -p·ln p over every entry, so each "
             "p below 1e-10 adds 2.3e-9 to the entropy. On a peaked row the true entropy is ~1e-10 and the "
             "clamped one 2.3e-7: the dynamic temperature moves from 0.500008 to 0.500223 (CPU and oracle "
             "agree on the former): 7,198 u on token 0, 48 times the error model's 151 u allowance here.",
             "backend temp_ext(t=1, delta=0.5, exponent=0.5) on 100 logits: 30 at token 0, 0 elsewhere",
             Witness((30.0,) + (0.0,) * 99, (("temp_ext", {"t": 1.0, "delta": 0.5, "exponent": 0.5}),),
                     expected="token 0 at 30 / 0.500008 = 59.9991", logit_of=0),
             {"logit_of_token_0": 59.9733}, {"kept": list(range(100)), "logit_of_token_0": 59.9991},
             lambda d: {"logit_of_token_0": round(d["logits"][0], 4)}),
    _finding("xtc-counts-masked-handoff", "xtc (CPU) after a backend filter",
             "The backend hands the CPU a fixed-shape array (masked entries are -inf, not removed). The CPU "
             "xtc's min_keep test counts them (size - pos_last >= min_keep), so it cuts where the same chain "
             "on the CPU (truncated array) does not: token 0 is removed.",
             "chain min_p(0.5) [backend] -> xtc(1.0, 0.1, min_keep 3, seed 1) [CPU] -> dist(3) on logits "
             "[3, 2.9, 0, -1, -2]",
             Witness((3.0, 2.9, 0.0, -1.0, -2.0), (("min_p", {"p": 0.5, "min_keep": 0}),
                                                   ("xtc", {"probability": 1.0, "threshold": 0.1, "min_keep": 3, "seed": 1}),
                                                   ("dist", {"seed": 3})), expected="the CPU chain's token, 0",
                     reference="cpu"),
             {"token": 1}, {"kept": [0, 1], "token": 0}, _TOKEN),
    _finding("backend-top-k-above-candidates-aborts", "top_k (backend)",
             "ggml_top_k asserts k <= the number of candidates: a backend top_k with k > n_vocab (or k above "
             "what an earlier top_k left) aborts the process (GGML_ASSERT(a->ne[0] >= k)). The CPU top_k "
             "keeps min(k, size).",
             "backend top_k(9) on 5 logits [0, 0, 0, 5, 4], in a child process",
             Witness(_ROW5, (("top_k", {"k": 9}),), aborts=True, expected="all 5 tokens kept"),
             {"killed_by_signal": True, "assert": "GGML_ASSERT(a->ne[0] >= k) failed"}, {"kept": [3, 4, 0, 1, 2]}),
    _finding("backend-third-reordering-sampler-aborts", "top_k / top_p (backend)",
             "A backend chain with a third reordering sampler (top_k or top_p) aborts the process: the "
             "candidates tensor gathered twice no longer reshapes (GGML_ASSERT(ggml_nelements(a) == ne0*ne1) "
             "or, for top_p, ggml_nrows(a) == 1). Two are fine; a temp(t <= 0) in between (one candidate) hides it.",
             "backend chain top_k(4) -> top_k(3) -> top_k(2) on logits [0, 0, 0, 5, 4], in a child process",
             Witness(_ROW5, (("top_k", {"k": 4}), ("top_k", {"k": 3}), ("top_k", {"k": 2})), aborts=True,
                     expected="tokens 3 and 4 kept"),
             {"killed_by_signal": True, "assert": "GGML_ASSERT(ggml_nelements(a) == ne0*ne1) failed"}, {"kept": [3, 4]}),
    _finding("backend-logit-bias-after-truncation-aborts", "logit_bias (backend), after top_k",
             "A backend logit_bias after a backend top_k (fewer candidates than n_vocab) aborts the process: "
             "its dense bias row has n_vocab entries (GGML_ASSERT(ggml_can_repeat(b, a))).",
             "backend chain top_k(2) -> logit_bias({4: +10}) on logits [0, 0, 0, 5, 4], in a child process",
             Witness(_ROW5, (("top_k", {"k": 2}), ("logit_bias", {"n_vocab": 5, "biases": [(4, 10.0)]})), aborts=True,
                     expected="tokens 3, 4 kept, token 4 at 14"),
             {"killed_by_signal": True, "assert": "GGML_ASSERT(ggml_can_repeat(b, a)) failed"}, {"kept": [3, 4]}),
    _finding("backend-non-finite-row-not-refused", "greedy (backend); every backend sampler",
             "No backend sampler refuses a NaN or +inf logit (llama_decode has no error for it). Greedy on "
             "a row with one NaN returns the LAST token, not the largest finite logit; dist returns the last "
             "token with NaN probabilities (test_backend_sampling records all 30 sampler x bad-row answers).",
             "backend greedy on logits [0.5, 2, NaN, -1, 0, 1.5]",
             Witness((0.5, 2.0, float("nan"), -1.0, 0.0, 1.5), (("greedy", {}),), expected="a refusal, or token 1"),
             {"token": 5}, {"error": "logits contain NaN at token ids [2]"}, _TOKEN),
]


if __name__ == "__main__" and "--run" in sys.argv:
    spec = json.loads(sys.argv[sys.argv.index("--run") + 1])
    w = Witness(tuple(spec["row"]), tuple((n, p) for n, p in spec["steps"]), tuple(spec["history"]))
    print(json.dumps(backend_answer(w)), flush=True)

__all__ = ["BACKEND_FINDINGS", "PICKS", "WITNESSES", "Witness", "backend_answer", "oracle_answer"]
