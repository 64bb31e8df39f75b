"""NaN, +inf and all -inf rows through every backend sampler; run as a child process
(``python -m properties.peers.llama_cpp.backend_bad_rows``) so that an abort fails one test, not pytest.
Prints one JSON line: {"sampler/kind": {token, candidates, logits (as strings), probs_nan}}."""
from __future__ import annotations

import json

import numpy as np

ROW = (0.5, 2.0, 1.0, -1.0, 0.0, 1.5)
KINDS = ("nan", "posinf", "all_neginf")
STEPS = {"greedy": [("greedy", {})], "dist": [("dist", {"seed": 1})], "top_k": [("top_k", {"k": 2})],
         "top_p": [("top_p", {"p": 0.5, "min_keep": 0})], "min_p": [("min_p", {"p": 0.1, "min_keep": 0})],
         "temp": [("temp", {"t": 0.5})], "temp0": [("temp", {"t": 0.0})],
         "temp_ext": [("temp_ext", {"t": 0.8, "delta": 0.5, "exponent": 1.0})],
         "penalties": [("penalties", {"last_n": 8, "repeat": 1.5, "freq": 0.1, "present": 0.1, "n_vocab": 6})],
         "logit_bias": [("logit_bias", {"n_vocab": 6, "biases": [(1, 1.0)]})]}


def bad_row(kind: str) -> np.ndarray:
    x = np.array(ROW, dtype=np.float32)
    if kind == "all_neginf":
        return np.full_like(x, -np.inf)
    x[2] = np.nan if kind == "nan" else np.inf
    return x


def answers() -> dict:
    from properties.peers.llama_cpp import backend_sampling as bs

    out = {}
    for name, steps in STEPS.items():
        for kind in KINDS:
            r = bs.run(bad_row(kind)[None], [steps], histories=[[2, 1]])[0]
            out[f"{name}/{kind}"] = {
                "token": r.token, "candidates": None if r.candidates is None else r.candidates.tolist(),
                "logits": None if r.logits is None else [repr(float(v)) for v in r.logits],
                "probs_nan": None if r.probs is None else bool(np.isnan(r.probs).any())}
    return out


if __name__ == "__main__":
    print(json.dumps(answers()), flush=True)
