"""A finding's witness as data: one call of llama.cpp (a row, a chain of catalogue samplers with
their constructor parameters, a token history) and how to replay it.

``where="cpu"``: llama.cpp's CPU samplers applied to the raw candidate array
(``llama_sampler_apply``); ``where="backend"``: the chain attached to a sequence and run inside
``llama_decode`` on logit-injection models (aborting witnesses in a child process). The same
witness is replayed here, rendered as a stand-alone script by ``reproducers``, and described by
the ledger (``findings``); the raw answers have the shape the scripts print after ``RESULT``, so
one ``pick`` maps both to what the finding records.
"""
from __future__ import annotations

import json
import math
import subprocess
import sys
from dataclasses import dataclass

import numpy as np

from oracle.candidates import TokenDataArray
from properties.samplers.records import RECORDS, RECORDS_BY_NAME

SELECTORS = tuple(r.name for r in RECORDS if r.kind == "select")


@dataclass(frozen=True)
class Fill:
    """A long row as data: ``n`` entries of ``value``, then ``at``'s (index, value) pairs."""
    n: int
    value: float = 0.0
    at: tuple[tuple[int, float], ...] = ()

    def values(self) -> np.ndarray:
        row = np.full(self.n, self.value)
        for i, v in self.at:
            row[i] = v
        return row

    def source(self) -> str:
        """Python source defining ``ROW`` (the scripts import numpy as np)."""
        start = f"np.zeros({self.n})" if self.value == 0 else f"np.full({self.n}, {self.value!r})"
        return "\n".join([f"ROW = {start}"] + [f"ROW[{i}] = {_literal(v)}" for i, v in self.at])


@dataclass(frozen=True)
class Witness:
    row: tuple | Fill
    steps: tuple  # ((record name, constructor parameters), ...)
    history: tuple = ()
    where: str = "backend"  # "backend" | "cpu"
    aborts: bool = False  # the backend call kills the process (GGML_ASSERT)
    reference: str = "oracle"  # "oracle", or "cpu": llama.cpp's own all-CPU chain (backend vs CPU findings)
    logit_of: int | None = None  # also report this token's final logit (rounded to 4 decimals)
    expected: str = ""  # the expected-vs-actual line's expectation, in words

    def values(self) -> np.ndarray:
        return self.row.values() if isinstance(self.row, Fill) else np.asarray(self.row, dtype=np.float64)

    def row_source(self) -> str:
        return self.row.source() if isinstance(self.row, Fill) else "ROW = " + _literal([float(v) for v in self.row])

    def steps_list(self) -> list:
        return [(n, dict(p)) for n, p in self.steps]

    @property
    def selects(self) -> bool:
        return self.steps[-1][0] in SELECTORS


def _literal(v) -> str:
    """A value as Python source; the scripts define ``inf`` (and import ``math``)."""
    if isinstance(v, float) and not np.isfinite(v):
        return "math.nan" if np.isnan(v) else ("-inf" if v < 0 else "inf")
    if isinstance(v, list):
        return "[" + ", ".join(_literal(x) for x in v) + "]"
    if isinstance(v, tuple):
        return "(" + ", ".join(_literal(x) for x in v) + ")"
    return repr(v)


def _raw(ids, logits, p, selected: int) -> dict:
    """The scripts' RESULT shape: non-finite logits as their repr, NaN p as "nan"."""
    return {"ids": [int(i) for i in ids],
            "logits": [repr(float(x)) if math.isinf(x) else float(x) for x in logits],
            "p": ["nan" if math.isnan(x) else float(x) for x in p], "selected": int(selected)}


def cpu_raw(w: Witness) -> dict:
    """llama.cpp's CPU samplers (one chain) applied to the raw row."""
    from properties.peers.llama_cpp import adapter as peer

    n = w.values().size
    with peer.chain([RECORDS_BY_NAME[name].llama.peer(p, n) for name, p in w.steps]) as chain:
        for t in w.history:
            chain.accept(int(t))
        out = chain.apply(w.values().astype(np.float32))
    return _raw(out.ids, out.logits, out.p, out.selected)


def oracle_raw(w: Witness) -> dict:
    """The oracle chain on the same row, in the same shape; ``error``: what it raised, and
    ``members``: the oracle samplers, for a finding about their state."""
    n = w.values().size
    members = [RECORDS_BY_NAME[name].build(p, n) for name, p in w.steps]
    for m in members:
        for t in w.history:
            m.accept(int(t))
    cur = TokenDataArray.from_logits(w.values())
    try:
        for m in members:
            m.apply(cur)
    except ValueError as exc:
        return {"error": f"ValueError: {exc}", "members": members}
    return {**_raw(cur.ids, cur.logits, cur.p, cur.selected), "error": None, "members": members}


def backend_answer(w: Witness) -> dict:
    """What the backend chain returns: token, candidates, logits (None where it returned nothing)."""
    from properties.peers.llama_cpp import backend_sampling as bs

    # llama_sampler_sample asserts a selection: only then call it
    r = bs.run(w.values().astype(np.float32)[None], [w.steps_list()], histories=[list(w.history)],
               sample=w.selects, guard=False)[0]
    token = r.token if r.token is not None else r.cpu_token
    return {"token": token, "candidates": None if r.candidates is None else r.candidates.tolist(),
            "logits": None if r.logits is None else [float(v) for v in r.logits]}


def backend_abort(w: Witness) -> dict:
    """Run the witness in a child process: {"killed_by_signal": bool, "assert": the GGML_ASSERT line}."""
    from properties.peers.llama_cpp.adapter import _REPO_ROOT

    proc = subprocess.run([sys.executable, "-m", "properties.peers.llama_cpp.witness", "--run", json.dumps(
        {"row": w.values().tolist(), "steps": w.steps_list(), "history": list(w.history)})],
        cwd=_REPO_ROOT, capture_output=True, text=True, timeout=120)
    line = next((ln for ln in proc.stderr.splitlines() if "GGML_ASSERT" in ln), "")
    return {"killed_by_signal": proc.returncode < 0, "assert": line[line.find("GGML_ASSERT"):].strip()}


def oracle_answer(w: Witness) -> dict:
    """The oracle chain (llama.cpp's CPU semantics, float64): surviving ids in order, and the token
    a dist(seed) at the end selects."""
    try:
        cur = TokenDataArray.from_logits(w.values())
    except ValueError as exc:
        return {"error": str(exc)}
    members = [RECORDS_BY_NAME[n].build(p, w.values().size) for n, p in w.steps]
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
    from properties.peers.llama_cpp import adapter as peer

    with peer.chain([getattr(peer, n)(**p) for n, p in w.steps]) as chain:
        for t in w.history:
            chain.accept(int(t))
        out = chain.apply(w.values().astype(np.float32))
    res = {"kept": out.ids[np.isfinite(out.logits)].tolist()}
    if 0 <= out.selected < out.ids.size:
        res["token"] = int(out.ids[out.selected])
    return res


if __name__ == "__main__" and "--run" in sys.argv:
    spec = json.loads(sys.argv[sys.argv.index("--run") + 1])
    w = Witness(tuple(spec["row"]), tuple((n, p) for n, p in spec["steps"]), tuple(spec["history"]))
    print(json.dumps(backend_answer(w)), flush=True)
