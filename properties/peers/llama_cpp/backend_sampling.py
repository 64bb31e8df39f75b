"""llama.cpp's backend samplers, run for real: injected logit rows, ``llama_decode``, read back.

llama-cpp-python 0.3.36 attaches a sampler chain to a sequence (``llama_context_params.samplers``);
the longest prefix of samplers with a ggml-graph version runs inside ``llama_decode`` on the CPU
backend, and ``llama_get_sampled_{token,probs,logits,candidates}_ith`` return what it produced.
``llama_sampler_sample`` then runs the rest of the chain (the CPU suffix) on those arrays. The
logits come from ``fixtures.logit_injection`` models, so the backend sees exactly the rows asked for.

``run(rows, chains)`` is the adapter; ``Injected`` keeps one model and context open for a
seeded stream. The gpu_impl-style functions at the bottom make this module an implementation
``pytest --impl properties.peers.llama_cpp.backend_sampling`` can judge: each builds a one-sampler chain
per row and returns the backend's answer as a fixed-shape [B, V] row (-inf where the backend
masked or dropped a token).

Calls that abort the process (a GGML_ASSERT in a graph op), and calls whose answer is a documented
NaN, are refused before they are made: ``guard`` raises ``Unavailable`` naming the finding that
documents them.
"""
from __future__ import annotations

import ctypes
import shutil
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from fixtures import llama_log, logit_injection as inj
from properties.peers.llama_cpp import adapter as peer
from properties.peers.llama_cpp.adapter import PeerSampler, Unavailable

TOKEN_NULL = -1
# which samplers llama.cpp implements as ggml graph ops is each record's ``llama.backend``,
# checked against ``backend_capable`` by properties/meta/test_catalogue.py


def _L():
    return peer._import()


def backend_capable(smp: PeerSampler) -> bool:
    """True when the sampler has a ggml-graph implementation (``backend_apply``)."""
    fn = smp._ptr.contents.iface.contents.backend_apply
    return bool(ctypes.cast(fn, ctypes.c_void_p).value)


@dataclass
class BackendResult:
    """What llama.cpp returned for one output row; None where it returned nothing."""

    n_vocab: int
    token: int | None
    probs: np.ndarray | None
    logits: np.ndarray | None
    candidates: np.ndarray | None  # None: identity order (ids 0..n-1)
    cpu_token: int | None = None  # llama_sampler_sample: the CPU suffix's token (or the backend's)

    @property
    def ids(self) -> np.ndarray:
        n = self.logits.size if self.logits is not None else (self.probs.size if self.probs is not None else 0)
        return self.candidates if self.candidates is not None else np.arange(n, dtype=np.int64)

    def dense(self) -> np.ndarray:
        """The backend's logits as a fixed-shape row: -inf for every token it dropped."""
        out = np.full(self.n_vocab, -np.inf, dtype=np.float32)
        if self.logits is None:
            raise ValueError("the backend returned no logits (a selecting chain)")
        ids = self.ids
        if np.unique(ids).size != ids.size or (ids < 0).any() or (ids >= self.n_vocab).any():
            raise ValueError(f"backend candidates are not distinct token ids: {ids[:8].tolist()}")
        out[ids] = self.logits
        return out


def _array(ptr, n: int, dtype) -> np.ndarray | None:
    if not ptr or n == 0:
        return None
    return np.ctypeslib.as_array(ptr, (n,)).astype(dtype, copy=True)


class Injected:
    """One injection model (rows [R, V]) and a context with one sequence per chain.

    ``decode(steps)`` feeds token ``steps[s]`` (selecting row ``steps[s] mod D``) to sequence s
    at that sequence's next position; ``read(s)`` returns what the backend produced for it and,
    with ``sample=True``, what ``llama_sampler_sample`` makes of it (accepting the token)."""

    def __init__(self, rows: np.ndarray, chains: Sequence[PeerSampler], out_type: str = "F32",
                 histories: Sequence[Sequence[int]] | None = None) -> None:
        llama_log.silence()
        L = self._L = _L()
        self.rows = np.atleast_2d(np.asarray(rows, dtype=np.float32))
        self.n_vocab = self.rows.shape[1]
        self.chains = list(chains)
        folder = inj.scratch_dir()
        try:  # use_mmap off: the file is read once, so it goes right after, whatever the load did
            path = inj.write_fast(folder / "m.gguf", self.rows, out_type=out_type)
            mp = L.llama_model_default_params()
            mp.use_mmap = False
            self.model = L.llama_model_load_from_file(str(path).encode(), mp)
        finally:
            shutil.rmtree(folder, ignore_errors=True)
        if not self.model:
            raise Unavailable("llama.cpp could not load the injection model")
        for chain, hist in zip(self.chains, histories or [()] * len(self.chains)):
            for t in hist:
                chain.accept(int(t))  # penalties' history (before the backend uploads its counts)
        n = max(1, len(self.chains))
        self._cfg = (L.llama_sampler_seq_config * n)()
        for s, chain in enumerate(self.chains):
            self._cfg[s].seq_id, self._cfg[s].sampler = s, ctypes.cast(chain._ptr, ctypes.c_void_p)
        cp = L.llama_context_default_params()
        cp.n_ctx = cp.n_batch = cp.n_ubatch = 256
        cp.n_seq_max = n
        cp.n_threads = cp.n_threads_batch = 1
        cp.samplers, cp.n_samplers = self._cfg, len(self.chains)
        self.ctx = L.llama_init_from_model(self.model, cp)
        if not self.ctx:
            L.llama_model_free(self.model)
            raise Unavailable("llama.cpp could not create a context with these sampler chains")
        self._pos = [0] * n
        self._batch = L.llama_batch_init(n, 0, 1)

    def decode(self, steps: Sequence[int]) -> None:
        b = self._batch
        for s, tok in enumerate(steps):
            b.token[s], b.pos[s], b.n_seq_id[s], b.logits[s] = int(tok), self._pos[s], 1, 1
            b.seq_id[s][0] = s
            self._pos[s] += 1
        b.n_tokens = len(steps)
        rc = self._L.llama_decode(self.ctx, b)
        if rc != 0:
            raise RuntimeError(f"llama_decode returned {rc}")

    def read(self, s: int, sample: bool = False) -> BackendResult:
        L, c = self._L, self.ctx
        res = BackendResult(
            self.n_vocab, None,
            _array(L.llama_get_sampled_probs_ith(c, s), L.llama_get_sampled_probs_count_ith(c, s), np.float32),
            _array(L.llama_get_sampled_logits_ith(c, s), L.llama_get_sampled_logits_count_ith(c, s), np.float32),
            _array(L.llama_get_sampled_candidates_ith(c, s), L.llama_get_sampled_candidates_count_ith(c, s), np.int64))
        tok = int(L.llama_get_sampled_token_ith(c, s))
        res.token = None if tok == TOKEN_NULL else tok
        if sample:
            res.cpu_token = int(L.llama_sampler_sample(self.chains[s]._ptr, c, s))
        return res

    def close(self) -> None:
        if getattr(self, "ctx", None):
            self._L.llama_batch_free(self._batch)
            self._L.llama_free(self.ctx)
            self._L.llama_model_free(self.model)
            self.ctx = None
        for chain in self.chains:
            chain.free()

    def __enter__(self) -> "Injected":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


Step = tuple[str, dict]
"""One chain member: a factory name of ``properties.peers.llama_cpp.adapter`` and its keyword arguments."""


def build(steps: Sequence[Step]) -> PeerSampler:
    return peer.chain([getattr(peer, name)(**params) for name, params in steps])


def backend_prefix(steps: Sequence[Step]) -> int:
    """How many leading members llama.cpp runs as graph ops (the rest runs on the CPU)."""
    n = 0
    for name, params in steps:
        with getattr(peer, name)(**params) as smp:
            if not backend_capable(smp):
                break
        n += 1
    return n


def abort_reason(steps: Sequence[Step], n_vocab: int) -> str | None:
    """The finding id when the backend prefix of ``steps`` would hit a GGML_ASSERT (the process
    aborts), else None. The rules generalise the findings' witnesses, which
    ``test_backend_sampling`` replays in child processes."""
    n, gathers = n_vocab, 0  # candidates left; reordering gathers (top_k / top_p) so far
    for name, p in steps[:backend_prefix(steps)]:
        reorders = (name == "top_k" and p["k"] > 0) or (name == "top_p" and p["p"] < 1)
        if reorders and gathers >= 2 and n > 1:
            return "backend-third-reordering-sampler-aborts"
        if name == "top_k" and p["k"] > 0:
            if p["k"] > n:
                return "backend-top-k-above-candidates-aborts"
            n = p["k"]
        elif name == "logit_bias" and len(p["biases"]) and n != n_vocab:
            return "backend-logit-bias-after-truncation-aborts"
        elif name in ("temp", "temp_ext") and p["t"] <= 0:
            n = 1
        gathers += reorders
    return None


class BackendAbort(Unavailable):
    """llama.cpp would abort the process on this chain (``args[0]`` = the finding id)."""


class BackendKnownNaN(BackendAbort):
    """llama.cpp answers NaN logits on this chain, a documented finding (``args[0]`` = its id):
    refused before the call and classified as the aborts are; the finding's replay (``guard=False``)
    still calls it, so an upstream fix shows in the ledger test."""


def known_nan_reason(steps: Sequence[Step], n_vocab: int) -> str | None:
    """The finding id when the backend prefix of ``steps`` meets a temp_ext with delta > 0 (and
    t > 0) on a single candidate: the graph divides the entropy by ln 1 = 0, where the CPU sampler
    returns early and leaves the logit."""
    n = n_vocab
    for name, p in steps[:backend_prefix(steps)]:
        if name == "top_k" and 0 < p["k"] < n:
            n = p["k"]
        elif name in ("temp", "temp_ext") and p["t"] <= 0:
            n = 1
        elif name == "temp_ext" and p["delta"] > 0 and n == 1:
            return "backend-temp-ext-single-candidate-nan"
    return None


def run(rows: np.ndarray, chains: Sequence[Sequence[Step]], histories: Sequence[Sequence[int]] | None = None,
        sample: bool = False, out_type: str = "F32", guard: bool = True) -> list[BackendResult]:
    """Row b through chain b, one ``llama_decode``; rows holding -inf/NaN get a model of their own.
    Raises ``BackendAbort`` (before calling llama.cpp) for a chain that would abort the process;
    ``guard=False`` calls it anyway (only ever in a child process: the findings' abort replays)."""
    rows = np.atleast_2d(np.asarray(rows, dtype=np.float32))
    for steps in chains if guard else ():
        why = abort_reason(steps, rows.shape[1])
        if why:
            raise BackendAbort(why)
        why = known_nan_reason(steps, rows.shape[1])
        if why:
            raise BackendKnownNaN(why)
    out: list[BackendResult | None] = [None] * rows.shape[0]
    for group in inj.rows_per_model(rows, out_type):
        built = [build(chains[b]) for b in group]
        hist = [histories[b] for b in group] if histories is not None else None
        with Injected(rows[group], built, out_type, hist) as m:
            m.decode(list(range(len(group))))
            for s, b in enumerate(group):
                out[b] = m.read(s, sample)
    return out  # type: ignore[return-value]


# ---- gpu_impl's API, answered by llama.cpp's backend ------------------------------------------

def _per_row(value, batch: int) -> list:
    return np.broadcast_to(np.asarray(value), (batch,)).tolist()


def _masked(x: np.ndarray, steps_of_row) -> np.ndarray:
    x = np.atleast_2d(np.asarray(x, dtype=np.float32))
    res = run(x, [steps_of_row(b) for b in range(x.shape[0])])
    return np.stack([r.dense() for r in res])


def _selected(x: np.ndarray, steps_of_row) -> np.ndarray:
    x = np.atleast_2d(np.asarray(x, dtype=np.float32))
    res = run(x, [steps_of_row(b) for b in range(x.shape[0])])
    return np.array([-1 if r.token is None else r.token for r in res], dtype=np.int64)


def temp(logits: np.ndarray, t) -> np.ndarray:
    ts = _per_row(t, np.atleast_2d(logits).shape[0])
    return _masked(logits, lambda b: [("temp", {"t": float(ts[b])})])


def temp_ext(logits: np.ndarray, t, delta, exponent) -> np.ndarray:
    B = np.atleast_2d(logits).shape[0]
    ts, ds, es = _per_row(t, B), _per_row(delta, B), _per_row(exponent, B)
    return _masked(logits, lambda b: [("temp_ext", {"t": float(ts[b]), "delta": float(ds[b]), "exponent": float(es[b])})])


def top_k(logits: np.ndarray, k) -> np.ndarray:
    ks = _per_row(k, np.atleast_2d(logits).shape[0])
    return _masked(logits, lambda b: [("top_k", {"k": int(ks[b])})])


def top_p(logits: np.ndarray, p, min_keep=0) -> np.ndarray:
    B = np.atleast_2d(logits).shape[0]
    ps, ms = _per_row(p, B), _per_row(min_keep, B)
    return _masked(logits, lambda b: [("top_p", {"p": float(ps[b]), "min_keep": int(ms[b])})])


def min_p(logits: np.ndarray, p, min_keep=0) -> np.ndarray:
    B = np.atleast_2d(logits).shape[0]
    ps, ms = _per_row(p, B), _per_row(min_keep, B)
    return _masked(logits, lambda b: [("min_p", {"p": float(ps[b]), "min_keep": int(ms[b])})])


def penalties(logits: np.ndarray, history, last_n, repeat, freq, present) -> np.ndarray:
    x = np.atleast_2d(np.asarray(logits, dtype=np.float32))
    B, V = x.shape
    hist = np.atleast_2d(np.asarray(history, dtype=np.int64))
    hist = np.broadcast_to(hist, (B, hist.shape[1]))
    ln, rp, fq, pr = (_per_row(a, B) for a in (last_n, repeat, freq, present))
    chains = [[("penalties", {"last_n": int(ln[b]), "repeat": float(rp[b]), "freq": float(fq[b]),
                              "present": float(pr[b]), "n_vocab": V})] for b in range(B)]
    histories = [[int(t) for t in hist[b] if t >= 0] for b in range(B)]  # -1 pads a short history
    return np.stack([r.dense() for r in run(x, chains, histories)])


def logit_bias(logits: np.ndarray, bias: np.ndarray) -> np.ndarray:
    x = np.atleast_2d(np.asarray(logits, dtype=np.float32))
    bias = np.broadcast_to(np.asarray(bias, dtype=np.float32), x.shape)
    pairs = [[(int(t), float(bias[b, t])) for t in np.flatnonzero(bias[b])] for b in range(x.shape[0])]
    return _masked(x, lambda b: [("logit_bias", {"n_vocab": x.shape[1], "biases": pairs[b]})])


def greedy(logits: np.ndarray) -> np.ndarray:
    return _selected(logits, lambda b: [("greedy", {})])


def softmax(logits: np.ndarray) -> np.ndarray:
    """The probabilities backend dist computes (``ggml_soft_max``), as a dense row."""
    x = np.atleast_2d(np.asarray(logits, dtype=np.float32))
    out = np.zeros(x.shape, dtype=np.float32)
    for b, r in enumerate(run(x, [[("dist", {"seed": 0})]] * x.shape[0])):
        out[b, r.ids] = r.probs
    return out


_SEED_OF_U: dict[float, int] = {}


def uniform_of_seed(seed: int) -> float:
    """The uniform backend dist(seed) uses first (libstdc++ mt19937, double draw) - registered so
    that ``dist(logits, u)`` can run dist with the seed that produces it."""
    from oracle.rng import Mt19937

    u = Mt19937(seed).uniform_double()
    _SEED_OF_U[u] = int(seed)
    return u


def dist(logits: np.ndarray, u) -> np.ndarray:
    """Backend dist: llama.cpp draws its own uniform, so ``u`` must come from ``uniform_of_seed``."""
    us = _per_row(u, np.atleast_2d(logits).shape[0])
    missing = [x for x in us if float(x) not in _SEED_OF_U]
    if missing:
        raise ValueError(f"u = {missing[0]} was not produced by uniform_of_seed: backend dist draws its own uniform")
    return _selected(logits, lambda b: [("dist", {"seed": _SEED_OF_U[float(us[b])]})])
