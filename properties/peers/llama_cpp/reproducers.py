"""Stand-alone reproducers for the llama.cpp findings: short scripts against llama-cpp-python's C
API (and gguf-py, for the backend ones), rendered from the ledger's witnesses, which the tests replay.

``script(finding_id)`` returns the script text (None for findings that need no upstream report:
agreements, or a crash already reproduced by a one-line C++ call). Every script prints its
expected-vs-actual line, then ``RESULT <json>`` with llama.cpp's raw answer; ``outcome(finding_id,
raw)`` maps that answer to the shape the finding records, so a test can run the script and compare.
"""
from __future__ import annotations

import json
import textwrap

from properties.peers.llama_cpp.witness import _literal
from properties.samplers.records import RECORDS_BY_NAME

PINNED = "llama-cpp-python==0.3.36 gguf==0.19.0 numpy"


def _call(name: str) -> str:
    """The record's C-API call template (a record without one cannot be in a reproducer)."""
    call = RECORDS_BY_NAME[name].llama.call if RECORDS_BY_NAME[name].llama else ""
    if not call:
        raise KeyError(f"sampler {name!r} has no reproducer call in its llama.cpp facet")
    return call


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


def _chain_code(steps) -> str:
    calls = [_call(name).format(**{k: _literal(v) for k, v in params.items()}) for name, params in steps]
    return "CHAIN = [\n    " + ",\n    ".join(calls) + ",\n]\n"


def _header(finding: dict, where: str) -> str:
    desc = textwrap.fill(finding["description"], 96, initial_indent="# ", subsequent_indent="# ")
    return (f"# Reproducer: {finding['id']} ({finding['sampler']})\n# {where}; needs: pip install {PINNED}\n"
            f"# witness: {finding['witness']}\n{desc}\n")


def script(finding_id: str) -> str | None:
    """The finding's stand-alone reproducer, rendered from its witness (None: no call to render)."""
    from properties.peers.llama_cpp.findings import BEHAVIOUR, finding

    f = finding(finding_id)
    w = f.call
    if w is None or f.kind != BEHAVIOUR:  # agreements and waivers need no upstream report
        return None
    row = f.row() | {"llama_output": f.llama_output, "oracle_output": f.oracle_output}
    if w.where == "backend":
        expected = w.expected + (" (the process aborts with a GGML_ASSERT instead)" if w.aborts else "")
        body = (f"{w.row_source()}\nHISTORY = {list(w.history)!r}\nSELECTS = {w.selects}\n"
                f"EXPECTED = {expected!r}\n" + _chain_code(w.steps) + "\n" + _BACKEND)
        return _header(row, "llama.cpp backend sampling (a sampler chain attached to a sequence, CPU backend)") + \
            _PRELUDE + "\n\n" + body
    expected = f"the oracle gives {f.oracle_output}"
    body = f"{w.row_source()}\nEXPECTED = {expected!r}\n" + _chain_code(w.steps) + "\n" + _CPU
    return _header(row, "llama.cpp CPU samplers (llama_sampler_apply on a raw candidate array)") + _PRELUDE + "\n\n" + body


def outcome(finding_id: str, raw: dict) -> dict:
    """The raw ``RESULT`` of a script in the shape the finding records as llama.cpp's output."""
    from properties.peers.llama_cpp.findings import finding

    return finding(finding_id).pick(raw)


def parse_result(stdout: str) -> dict | None:
    line = next((ln for ln in reversed(stdout.splitlines()) if ln.startswith("RESULT ")), None)
    return json.loads(line[len("RESULT "):]) if line else None
