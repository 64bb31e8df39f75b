"""Stand-alone reproducers for the llama.cpp findings: short scripts against llama-cpp-python's C
API (and gguf-py, for the backend ones), generated from the same witness data the tests replay.

``script(finding_id)`` returns the script text (None for findings that need no upstream report:
agreements, or a crash already reproduced by a one-line C++ call). Every script prints its
expected-vs-actual line, then ``RESULT <json>`` with llama.cpp's raw answer; ``outcome(finding_id,
raw)`` maps that answer to the shape the finding records, so a test can run the script and compare.
"""
from __future__ import annotations

import json
import textwrap
from typing import Callable

import numpy as np

from properties.peers import backend_findings as bf

PINNED = "llama-cpp-python==0.3.36 gguf==0.19.0 numpy"

# CPU witnesses of findings.py: row code (defines ROW), chain, pick from the raw answer
CPU_WITNESSES: dict[str, tuple[str, list, Callable[[dict], dict]]] = {
    "logit-bias-stale-sorted": ("ROW = [1.0, 1.0, 1.0]",
                                [("top_k", {"k": 3}), ("logit_bias", {"n_vocab": 3, "biases": [(1, 0.5)]}), ("top_k", {"k": 1})],
                                lambda r: {"ids": r["ids"]}),
    "logit-bias-repeated-token-searched": ("ROW = [0.0, 1.0, 2.0, 3.0]",
                                           [("top_k", {"k": 4}), ("logit_bias", {"n_vocab": 4, "biases": [(3, 0.5), (3, 1.0)]})],
                                           lambda r: {"logit_3": float(r["logits"][r["ids"].index(3)])}),
    "typical-nan-entropy": ("ROW = [0.0, -np.inf, 1.0, 2.0, -1.0, 0.5]", [("typical", {"p": 0.5, "min_keep": 0})],
                            lambda r: {"ids": r["ids"]}),
    "typical-nan-entropy-scrambled": ("ROW = np.linspace(2, -2, 17)\nROW[8] = -np.inf",
                                      [("typical", {"p": 0.5, "min_keep": 0})], lambda r: {"ids": r["ids"]}),
    "mirostat-k-overflow": ("ROW = [0.0, 0.0, 0.0, 0.0]",
                            [("mirostat", {"n_vocab": 4, "seed": 0, "tau": 5.0, "eta": 0.1, "m": 100})],
                            lambda r: {"size": len(r["ids"])}),
    "bucket-sort-int-overflow": ("ROW = np.zeros(300)\nROW[5], ROW[7] = 1e9, 3e8", [("top_k", {"k": 129})],
                                 lambda r: {"first": r["ids"][0], "token_5_kept": 5 in r["ids"]}),
    "top-n-sigma-variance-overflow": ("ROW = [3e19, 0.0, 0.0, 0.0]", [("top_n_sigma", {"n": 1.0})],
                                      lambda r: {"masked": [i for i, x in zip(r["ids"], r["logits"]) if x == "-inf"]}),
    "greedy-no-finite-logit": ("ROW = [-np.inf] * 4", [("greedy", {})], lambda r: {"selected": r["selected"]}),
    "dist-no-finite-logit": ("ROW = [-np.inf] * 4", [("dist", {"seed": 0})],
                             lambda r: {"selected": r["selected"], "p_is_nan": all(p == "nan" for p in r["p"])}),
    "softmax-float-running-sum": ("ROW = np.zeros(262144)\nROW[0] = 12.0", [("top_p", {"p": 0.5, "min_keep": 0})],
                                  lambda r: {"p_top": round(float(r["p"][0]), 6)}),
}

_CALLS = {
    "greedy": "L.llama_sampler_init_greedy()", "dist": "L.llama_sampler_init_dist({seed})",
    "temp": "L.llama_sampler_init_temp({t})", "temp_ext": "L.llama_sampler_init_temp_ext({t}, {delta}, {exponent})",
    "top_k": "L.llama_sampler_init_top_k({k})", "top_p": "L.llama_sampler_init_top_p({p}, {min_keep})",
    "min_p": "L.llama_sampler_init_min_p({p}, {min_keep})", "typical": "L.llama_sampler_init_typical({p}, {min_keep})",
    "xtc": "L.llama_sampler_init_xtc({probability}, {threshold}, {min_keep}, {seed})",
    "top_n_sigma": "L.llama_sampler_init_top_n_sigma({n})",
    "penalties": "L.llama_sampler_init_penalties({n_vocab}, {last_n}, {repeat}, {freq}, {present})",
    "logit_bias": "bias({n_vocab}, {biases})",
    "mirostat": "L.llama_sampler_init_mirostat({n_vocab}, {seed}, {tau}, {eta}, {m})",
}

_PRELUDE = '''\
import ctypes, json, math, os, sys, tempfile
import numpy as np
import llama_cpp as L

inf = math.inf


def bias(n_vocab, pairs):
    arr = (L.llama_logit_bias * max(len(pairs), 1))(*[L.llama_logit_bias(t, b) for t, b in pairs])
    KEEP.append(arr)
    return L.llama_sampler_init_logit_bias(n_vocab, len(pairs), arr)


KEEP = []


def chain(calls):
    c = L.llama_sampler_chain_init(L.llama_sampler_chain_default_params())
    for smp in calls:
        L.llama_sampler_chain_add(c, smp)
    return c
'''

_BACKEND = '''\
def injection_model(path, row):
    """A one-layer llama whose output logits are exactly ROW for token 0 at any position: zero
    layer weights, one-hot embeddings, rms eps 0, output norm 1/sqrt(4), output.weight[:, 0] = ROW."""
    import gguf
    v, d = len(row), 4
    w = gguf.GGUFWriter(path, "llama")
    for key, val in (("context_length", 256), ("embedding_length", d), ("block_count", 1),
                     ("feed_forward_length", 4), ("head_count", 1), ("head_count_kv", 1),
                     ("rope_dimension_count", d), ("vocab_size", v)):
        getattr(w, "add_" + key)(val)
    w.add_layer_norm_rms_eps(0.0)
    w.add_rope_freq_base(10000.0)
    w.add_tokenizer_model("llama")
    w.add_token_list([f"t{i}" for i in range(v)])
    w.add_token_scores([0.0] * v)
    w.add_token_types([1] * v)
    emb = np.zeros((v, d), np.float32)
    emb[np.arange(v), np.arange(v) % d] = 1
    out = np.zeros((v, d), np.float32)
    out[:, 0] = row
    z = lambda a, b: np.zeros((a, b), np.float32)
    tensors = {"token_embd.weight": emb, "output_norm.weight": np.full(d, 0.5, np.float32), "output.weight": out,
               "blk.0.attn_norm.weight": np.ones(d, np.float32), "blk.0.ffn_norm.weight": np.ones(d, np.float32),
               "blk.0.attn_q.weight": z(d, d), "blk.0.attn_k.weight": z(d, d), "blk.0.attn_v.weight": z(d, d),
               "blk.0.attn_output.weight": z(d, d), "blk.0.ffn_gate.weight": z(4, d),
               "blk.0.ffn_up.weight": z(4, d), "blk.0.ffn_down.weight": z(d, 4)}
    for name, t in tensors.items():
        w.add_tensor(name, t)
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()


path = os.path.join(tempfile.mkdtemp(), "inject.gguf")
injection_model(path, np.asarray(ROW, np.float32))
L.llama_backend_init()
mp = L.llama_model_default_params()
mp.use_mmap = False
model = L.llama_model_load_from_file(path.encode(), mp)
smpl = chain(CHAIN)
for t in HISTORY:
    L.llama_sampler_accept(smpl, t)
cfg = (L.llama_sampler_seq_config * 1)()
cfg[0].seq_id, cfg[0].sampler = 0, ctypes.cast(smpl, ctypes.c_void_p)
cp = L.llama_context_default_params()
cp.n_ctx = cp.n_batch = cp.n_ubatch = 256
cp.n_threads = cp.n_threads_batch = 1
cp.samplers, cp.n_samplers = cfg, 1
print("expected:", EXPECTED, flush=True)
ctx = L.llama_init_from_model(model, cp)  # backend sampler chains are built (and may assert) here
batch = L.llama_batch_get_one((L.llama_token * 1)(0), 1)
assert L.llama_decode(ctx, batch) == 0


def read(get, count, kind):
    n = count(ctx, 0)
    p = get(ctx, 0)
    return [kind(p[i]) for i in range(n)] if p and n else None


token = L.llama_get_sampled_token_ith(ctx, 0)
raw = {"token": None if token < 0 else token,
       "candidates": read(L.llama_get_sampled_candidates_ith, L.llama_get_sampled_candidates_count_ith, int),
       "logits": read(L.llama_get_sampled_logits_ith, L.llama_get_sampled_logits_count_ith, float)}
if SELECTS and raw["token"] is None:  # the CPU runs the rest of the chain on the backend's arrays
    raw["token"] = L.llama_sampler_sample(smpl, ctx, 0)
print("actual:  ", raw)
print("RESULT", json.dumps(raw))
'''

_CPU = '''\
x = np.asarray(ROW, np.float32)
buf = (L.llama_token_data * len(x))(*[L.llama_token_data(i, float(v), 0.0) for i, v in enumerate(x)])
arr = L.llama_token_data_array(data=buf, size=len(x), selected=-1, sorted=False)
smpl = chain(CHAIN)
print("expected:", EXPECTED, flush=True)
L.llama_sampler_apply(smpl, ctypes.byref(arr))
start = (ctypes.cast(arr.data, ctypes.c_void_p).value - ctypes.addressof(buf)) // ctypes.sizeof(L.llama_token_data)
kept = [buf[start + i] for i in range(arr.size)]
raw = {"ids": [d.id for d in kept], "logits": [repr(d.logit) if math.isinf(d.logit) else d.logit for d in kept],
       "p": ["nan" if math.isnan(d.p) else d.p for d in kept], "selected": arr.selected}
print("actual:  ", {k: v[:12] if isinstance(v, list) else v for k, v in raw.items()})
print("RESULT", json.dumps(raw))
'''


def _literal(v) -> str:
    """A parameter as Python source; the script defines ``inf`` (and ``math``)."""
    if isinstance(v, float) and not np.isfinite(v):
        return "math.nan" if np.isnan(v) else ("-inf" if v < 0 else "inf")
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_literal(x) for x in v) + "]" if isinstance(v, list) else \
            "(" + ", ".join(_literal(x) for x in v) + ")"
    return repr(v)


def _chain_code(steps) -> str:
    calls = [_CALLS[name].format(**{k: _literal(v) for k, v in params.items()}) for name, params in steps]
    return "CHAIN = [\n    " + ",\n    ".join(calls) + ",\n]\n"


def _header(finding: dict, where: str) -> str:
    desc = textwrap.fill(finding["description"], 96, initial_indent="# ", subsequent_indent="# ")
    return (f"# Reproducer: {finding['id']} ({finding['sampler']})\n# {where}; needs: pip install {PINNED}\n"
            f"# witness: {finding['witness']}\n{desc}\n")


def script(finding_id: str) -> str | None:
    from properties.peers.findings import FINDINGS

    f = next((x.row() | {"llama_output": x.llama_output, "oracle_output": x.oracle_output}
              for x in FINDINGS if x.id == finding_id), None)
    if f is None:
        raise KeyError(f"no finding {finding_id!r}")
    if finding_id in bf.WITNESSES:
        w = bf.WITNESSES[finding_id]
        row = "ROW = " + _literal([float(v) for v in w.row])
        expected = w.expected + (" (the process aborts with a GGML_ASSERT instead)" if w.aborts else "")
        body = (f"{row}\nHISTORY = {list(w.history)!r}\nSELECTS = {w.steps[-1][0] in bf.SELECTORS}\n"
                f"EXPECTED = {expected!r}\n" + _chain_code(w.steps) + "\n" + _BACKEND)
        return _header(f, "llama.cpp backend sampling (a sampler chain attached to a sequence, CPU backend)") + \
            _PRELUDE + "\n\n" + body
    if finding_id in CPU_WITNESSES:
        row, steps, _ = CPU_WITNESSES[finding_id]
        expected = f"the oracle gives {f['oracle_output']}"
        body = f"{row}\nEXPECTED = {expected!r}\n" + _chain_code(steps) + "\n" + _CPU
        return _header(f, "llama.cpp CPU samplers (llama_sampler_apply on a raw candidate array)") + _PRELUDE + "\n\n" + body
    return None


def outcome(finding_id: str, raw: dict) -> dict:
    """The raw ``RESULT`` of a script in the shape the finding records as llama.cpp's output."""
    if finding_id in CPU_WITNESSES:
        return CPU_WITNESSES[finding_id][2](raw)
    return bf.PICKS[finding_id](raw)


def parse_result(stdout: str) -> dict | None:
    line = next((ln for ln in reversed(stdout.splitlines()) if ln.startswith("RESULT ")), None)
    return json.loads(line[len("RESULT "):]) if line else None
