"""logitcheck harness (protocol version 2, and 1 when greeted so) over llama.cpp's own sampler library.

    python examples/llama_cpp/harness.py

Every answer comes from libllama, the shared library llama-cpp-python installs, through its ctypes
bindings (``llama_cpp.llama_cpp``): each dense row becomes a ``llama_token_data_array`` of its
finite candidates in vocabulary order (a -inf logit is "no candidate" in the protocol, so it is
left out, as an engine masks it), the llama.cpp sampler is applied to it, and the survivors go
back to their ids with -inf elsewhere. The chain functions build a real ``llama_sampler_chain``.

llama.cpp's random samplers (dist, mirostat-v2, xtc) draw from their own ``std::mt19937``. The
protocol hands the harness the uniform each draw must use, so the harness drives the generator to
produce exactly that uniform: libstdc++ turns the next one or two 32-bit outputs into the uniform
(``generate_canonical``), the outputs are the tempered words of the state at the position index,
and tempering is invertible, so writing two untempered words at the end of the state and the
position in front of them makes the next draw any uniform of the form k / 2^64 (every uniform the
judge sends at or above 2^-12, and 0). The state is found in the sampler's context by its seeded
contents, never by a fixed offset, and checked at start (``_self_check``). The samplers' own
arithmetic, sorts and decisions are llama.cpp's; only the generator's output is chosen.

Reads requests on stdin, answers on stdout (docs/protocol.md: version 2, whose answers echo the
call's id; version 1 when the judge greets with it); logs go to stderr.
"""
from __future__ import annotations

import ctypes
import math
import sys
from typing import Any, BinaryIO, Callable

import numpy as np
from llama_cpp import llama_cpp as L

NAME = "llama.cpp-libllama"
VERSION = 2
TOKEN = np.dtype([("id", "<i4"), ("logit", "<f4"), ("p", "<f4")])
DTYPES = {"f32": np.dtype("<f4"), "f64": np.dtype("<f8"), "i64": np.dtype("<i8"), "i32": np.dtype("<i4"),
          "u8": np.dtype("u1"), "str": np.dtype("u1")}
NEG_INF = np.float32(-np.inf)


class Refused(Exception):
    """ERROR refused: the input is outside what the engine answers (NaN, +inf, no candidate)."""


class Unsupported(Exception):
    """ERROR unsupported: a case this harness does not implement."""


# ---- framing -------------------------------------------------------------------------------

def read_line(inp: BinaryIO) -> str | None:
    line = inp.readline(4097)
    if not line:
        return None
    return line.rstrip(b"\n").decode("ascii")


def read_array(inp: BinaryIO, header: str) -> tuple[str, np.ndarray]:
    parts = header.split(" ")
    if parts[0] != "ARG" or len(parts) < 4:
        raise ValueError(f"expected an ARG header, got {header[:60]!r}")
    name, code, ndim = parts[1], parts[2], int(parts[3])
    dims = tuple(int(d) for d in parts[4:4 + ndim]) if ndim else ()
    dt = DTYPES[code]
    count = int(np.prod(dims)) if ndim else 1
    data = inp.read(count * dt.itemsize)
    arr = np.frombuffer(data, dtype=dt).reshape(dims)
    if code == "str":
        return name, bytes(arr).decode("utf-8")
    return name, arr


def write_results(out: BinaryIO, tag: str, results: list[np.ndarray]) -> None:
    out.write(f"OK {tag}{len(results)}\n".encode())
    for r in results:
        r = np.ascontiguousarray(r)
        code = "i64" if np.issubdtype(r.dtype, np.integer) else "f32"
        r = r.astype(DTYPES[code], copy=False)
        out.write(f"RESULT {code} {r.ndim}{''.join(' ' + str(d) for d in r.shape)}\n".encode())
        out.write(r.tobytes())


# ---- arguments -----------------------------------------------------------------------------

def logits_of(args: dict[str, Any]) -> np.ndarray:
    x = np.asarray(args["logits"], dtype=np.float32)
    if x.ndim != 2 or x.shape[0] < 1 or x.shape[1] < 1:
        raise Refused(f"logits must be [batch, vocab] with both >= 1, got shape {x.shape}")
    bad = np.isnan(x) | (x == np.inf)
    if bad.any():
        raise Refused(f"logits contain NaN or +inf in rows {np.flatnonzero(bad.any(axis=1)).tolist()}")
    return x


def per_row(args: dict[str, Any], name: str, batch: int, default: float | None = None) -> np.ndarray:
    """A parameter as one value per row (a scalar is shared by every row)."""
    if name not in args:
        if default is None:
            raise Refused(f"missing argument {name}")
        return np.full(batch, default)
    v = np.asarray(args[name])
    if v.ndim == 0:
        return np.full(batch, v[()])
    if v.shape != (batch,):
        raise Refused(f"parameter {name} has shape {v.shape} but batch is {batch}")
    return v


def uniforms(args: dict[str, Any], name: str, batch: int) -> np.ndarray:
    u = per_row(args, name, batch).astype(np.float64)
    if not ((u >= 0) & (u < 1)).all():
        raise Refused(f"{name} must lie in [0, 1)")
    return u


def histories(args: dict[str, Any], batch: int, vocab: int) -> list[list[int]]:
    h = np.asarray(args.get("history", np.zeros((batch, 0), np.int64)), dtype=np.int64)
    if h.ndim == 1:
        h = np.broadcast_to(h, (batch, h.shape[0]))
    if h.ndim != 2 or h.shape[0] != batch:
        raise Refused(f"history has shape {h.shape} but must be [batch={batch}, H]")
    if ((h < -1) | (h >= vocab)).any():
        raise Refused(f"history holds ids outside [-1, {vocab}) (-1 is padding)")
    return [[int(t) for t in row if t >= 0] for row in h]


# ---- llama.cpp's generator, driven to a given uniform -----------------------------------------

_N, _MARK_SEED = 624, 0x5EED1E57  # mt19937's state words; a seed whose state is easy to find


def _seeded_words(seed: int, n: int) -> list[int]:
    """The first n words of std::mt19937's state after seed(seed) (its published recurrence)."""
    x = [seed & 0xFFFFFFFF]
    for i in range(1, n):
        x.append((1812433253 * (x[-1] ^ (x[-1] >> 30)) + i) & 0xFFFFFFFF)
    return x


def _untemper(y: int) -> int:
    """The state word whose tempered output is y (each tempering step inverted, last first)."""
    y ^= y >> 18
    y ^= (y << 15) & 0xEFC60000
    t = y
    for _ in range(4):  # y ^= (y << 7) & mask: 7 bits become right per pass
        t = y ^ ((t << 7) & 0x9D2C5680)
    y = t & 0xFFFFFFFF
    t = y
    for _ in range(2):  # y ^= y >> 11
        t = y ^ (t >> 11)
    return t & 0xFFFFFFFF


class Generator:
    """The ``std::mt19937`` inside one llama.cpp sampler's context, found by its seeded words.

    libstdc++ keeps the state as ``uint_fast32_t _M_x[624]`` (8 bytes per word on x86-64 Linux)
    then ``size_t _M_p``, the index of the next word to temper and return."""

    def __init__(self, smpl: Any, seed: int = _MARK_SEED, search_bytes: int = 1024) -> None:
        ctx = smpl.contents.ctx
        want = _seeded_words(seed, 3)
        base = None
        for off in range(0, search_bytes, 8):
            w = (ctypes.c_uint64 * 3).from_address(ctx + off)
            if list(w) == want:
                base = ctx + off
                break
        if base is None:
            raise Unsupported("the sampler's mt19937 state was not found in its context")
        self.words = (ctypes.c_uint64 * _N).from_address(base)
        self.pos = ctypes.c_uint64.from_address(base + 8 * _N)
        if self.pos.value != _N or list(self.words[:8]) != _seeded_words(seed, 8):
            raise Unsupported("the sampler's mt19937 state does not look freshly seeded")

    def next_outputs(self, outputs: tuple[int, ...]) -> None:
        """The next len(outputs) 32-bit draws will be ``outputs``, in order."""
        start = _N - len(outputs)
        for i, y in enumerate(outputs):
            self.words[start + i] = _untemper(y)
        self.pos.value = start

    def next_double(self, u: float) -> None:
        """The next ``uniform_real_distribution<double>(0, 1)`` draw will be u (exact when u·2^64
        is an integer; else the nearest such value, which only uniforms below 2^-12 need)."""
        k = round(u * 2.0 ** 64)  # u * 2^64 is exact (a power-of-two scaling)
        self.next_outputs((k & 0xFFFFFFFF, k >> 32))

    def next_float_deciding(self, c: float, threshold: float) -> None:
        """The next ``uniform_real_distribution<float>`` draw (one output x, float(x)·2^-32) lies on
        the same side of ``threshold`` as c: c itself when c·2^32 is an integer (every float32
        c >= 2^-9), else the nearest draw on c's side."""
        scaled = float(np.float32(c)) * 2.0 ** 32
        x = math.ceil(scaled) if c > threshold else math.floor(scaled)
        self.next_outputs((min(max(x, 0), 2 ** 32 - 256),))


# ---- candidate arrays ------------------------------------------------------------------------

class Candidates:
    """One row's finite candidates, in vocabulary order, as a ``llama_token_data_array``."""

    def __init__(self, row: np.ndarray) -> None:
        self.vocab = row.size
        ids = np.flatnonzero(row > NEG_INF)
        self.n = ids.size
        self.buf = (L.llama_token_data * max(self.n, 1))()
        view = np.frombuffer(self.buf, dtype=TOKEN)[:self.n]
        view["id"], view["logit"], view["p"] = ids, row[ids], 0.0
        self.arr = L.llama_token_data_array(data=self.buf, size=self.n, selected=-1, sorted=False)

    def apply(self, smpl: Any) -> np.ndarray:
        """Apply the sampler; the candidates it left (it may move the data pointer: xtc)."""
        L.llama_sampler_apply(smpl, ctypes.byref(self.arr))
        start = (ctypes.cast(self.arr.data, ctypes.c_void_p).value - ctypes.addressof(self.buf)) // TOKEN.itemsize
        return np.frombuffer(self.buf, dtype=TOKEN)[start:start + self.arr.size]

    def dense(self, left: np.ndarray) -> np.ndarray:
        out = np.full(self.vocab, NEG_INF, dtype=np.float32)
        out[left["id"]] = left["logit"]
        return out

    def selected_id(self, left: np.ndarray) -> int:
        s = int(self.arr.selected)
        if not 0 <= s < left.size:
            raise RuntimeError(f"llama.cpp selected index {s} of {left.size} candidates")
        return int(left["id"][s])


def owned(ptr: Any) -> Any:
    if not ptr:
        raise RuntimeError("llama.cpp returned a NULL sampler")
    return ptr


def name_of(smpl: Any) -> str:
    return L.llama_sampler_name(smpl).decode()


def filter_rows(x: np.ndarray, make: Callable[[int], Any], accept: Callable[[int], list[int]] | None = None
                ) -> np.ndarray:
    """Apply ``make(row)``'s sampler to each row; a row without candidates stays as it is."""
    out = np.empty_like(x)
    for r in range(x.shape[0]):
        cand = Candidates(x[r])
        if cand.n == 0:
            out[r] = x[r]
            continue
        smpl = owned(make(r))
        try:
            for t in (accept(r) if accept else ()):
                L.llama_sampler_accept(smpl, t)
            out[r] = cand.dense(cand.apply(smpl))
        finally:
            L.llama_sampler_free(smpl)
    return out


def require_candidates(x: np.ndarray, what: str) -> None:
    empty = ~(x > NEG_INF).any(axis=1)
    if empty.any():
        raise Refused(f"{what}: rows {np.flatnonzero(empty).tolist()} have no finite logit")


# ---- the functions ---------------------------------------------------------------------------

def f_softmax(a: dict) -> list:
    """llama.cpp's probabilities as its dist sampler leaves them (expf, double normaliser)."""
    x = logits_of(a)
    out = np.zeros_like(x)
    smpl = owned(L.llama_sampler_init_dist(_MARK_SEED))
    try:
        for r in range(x.shape[0]):
            cand = Candidates(x[r])
            if cand.n:
                left = cand.apply(smpl)
                out[r, left["id"]] = left["p"]
    finally:
        L.llama_sampler_free(smpl)
    return [out]


def f_greedy(a: dict) -> list:
    x = logits_of(a)
    require_candidates(x, "greedy")
    ids = np.empty(x.shape[0], np.int64)
    smpl = owned(L.llama_sampler_init_greedy())
    try:
        for r in range(x.shape[0]):
            cand = Candidates(x[r])
            ids[r] = cand.selected_id(cand.apply(smpl))
    finally:
        L.llama_sampler_free(smpl)
    return [ids]


def new_dist() -> tuple[Any, Generator]:
    smpl = owned(L.llama_sampler_init_dist(_MARK_SEED))
    return smpl, Generator(smpl)


def f_dist(a: dict) -> list:
    x = logits_of(a)
    require_candidates(x, "dist")
    u = uniforms(a, "u", x.shape[0])
    ids = np.empty(x.shape[0], np.int64)
    smpl, gen = new_dist()
    try:
        for r in range(x.shape[0]):
            cand = Candidates(x[r])
            gen.next_double(float(u[r]))
            ids[r] = cand.selected_id(cand.apply(smpl))
    finally:
        L.llama_sampler_free(smpl)
    return [ids]


class _Mirostat2(ctypes.Structure):
    # llama_sampler_mirostat_v2's leading fields (llama-sampler.cpp): seed, seed_cur, tau, eta, mu
    _fields_ = [("seed", ctypes.c_uint32), ("seed_cur", ctypes.c_uint32), ("tau", ctypes.c_float),
                ("eta", ctypes.c_float), ("mu", ctypes.c_float)]


def f_mirostat_v2(a: dict) -> list:
    x = logits_of(a)
    B = x.shape[0]
    require_candidates(x, "mirostat_v2")
    mu, tau, eta = (per_row(a, n, B).astype(np.float32) for n in ("mu", "tau", "eta"))
    u = uniforms(a, "u", B)
    ids, new_mu = np.empty(B, np.int64), np.empty(B, np.float32)
    for r in range(B):
        smpl = owned(L.llama_sampler_init_mirostat_v2(_MARK_SEED, float(tau[r]), float(eta[r])))
        try:
            fields = _Mirostat2.from_address(smpl.contents.ctx)
            if (fields.seed, fields.tau, fields.eta) != (_MARK_SEED, tau[r], eta[r]):
                raise Unsupported("mirostat-v2's context does not have the expected layout")
            fields.mu = float(mu[r])
            gen = Generator(smpl)
            gen.next_double(float(u[r]))
            cand = Candidates(x[r])
            ids[r] = cand.selected_id(cand.apply(smpl))
            new_mu[r] = fields.mu
        finally:
            L.llama_sampler_free(smpl)
    return [ids, new_mu]


def f_xtc(a: dict) -> list:
    x = logits_of(a)
    B = x.shape[0]
    chance = per_row(a, "chance", B).astype(np.float32)
    if not ((chance >= 0) & (chance <= 1)).all():
        raise Refused("chance must lie in [0, 1]")
    prob, thr = per_row(a, "probability", B), per_row(a, "threshold", B)
    mk = per_row(a, "min_keep", B, 0)

    def make(r: int) -> Any:
        smpl = owned(L.llama_sampler_init_xtc(float(prob[r]), float(thr[r]), int(mk[r]), _MARK_SEED))
        if name_of(smpl) == "xtc":  # the disabled sampler ("?xtc") draws nothing
            Generator(smpl).next_float_deciding(float(chance[r]), float(np.float32(prob[r])))
        return smpl
    return [filter_rows(x, make)]


def _filter(init: Callable[..., Any], *names: str, defaults: dict[str, float] | None = None) -> Callable[[dict], list]:
    defaults = defaults or {}

    def call(a: dict) -> list:
        x = logits_of(a)
        cols = [per_row(a, n, x.shape[0], defaults.get(n)) for n in names]
        return [filter_rows(x, lambda r: init(*(c[r].item() for c in cols)))]
    return call


def _top_k(k: Any) -> Any:
    return L.llama_sampler_init_top_k(int(k))


def _with_min_keep(init: Callable[[float, int], Any]) -> Callable[[Any, Any], Any]:
    return lambda p, mk: init(float(p), int(mk))


def f_penalties(a: dict) -> list:
    x = logits_of(a)
    B, V = x.shape
    hist = histories(a, B, V)
    last_n, rep, freq, pres = (per_row(a, n, B) for n in ("last_n", "repeat", "freq", "present"))

    def make(r: int) -> Any:
        return L.llama_sampler_init_penalties(V, int(last_n[r]), float(rep[r]), float(freq[r]), float(pres[r]))
    return [filter_rows(x, make, accept=lambda r: hist[r])]


def f_logit_bias(a: dict) -> list:
    x = logits_of(a)
    B, V = x.shape
    bias = np.asarray(a["bias"], dtype=np.float32)
    if bias.shape not in ((V,), (B, V)):
        raise Refused(f"bias has shape {bias.shape} but must be [{V}] or [{B}, {V}]")
    bias = np.broadcast_to(bias, (B, V))
    if (np.isnan(bias) | (bias == np.inf)).any():
        raise Refused("bias contains NaN or +inf")
    keep = []  # the ctypes bias lists must outlive their samplers

    def make(r: int) -> Any:
        toks = np.flatnonzero(bias[r] != 0)  # llama.cpp's bias is a list; 0 entries add nothing
        arr = (L.llama_logit_bias * max(toks.size, 1))(*[L.llama_logit_bias(int(t), float(bias[r, t])) for t in toks])
        keep.append(arr)
        return L.llama_sampler_init_logit_bias(V, int(toks.size), arr)
    return [filter_rows(x, make)]


def chain_of(V: int, r: int, cols: dict[str, np.ndarray], with_dist: bool) -> tuple[Any, Generator | None]:
    """llama.cpp's chain for one row: penalties -> top_k -> top_p -> min_p -> temp [-> dist]."""
    chain = owned(L.llama_sampler_chain_init(L.llama_sampler_chain_default_params()))
    members = [L.llama_sampler_init_penalties(V, int(cols["last_n"][r]), float(cols["repeat"][r]),
                                              float(cols["freq"][r]), float(cols["present"][r])),
               L.llama_sampler_init_top_k(int(cols["k"][r])),
               L.llama_sampler_init_top_p(float(cols["p"][r]), 0),
               L.llama_sampler_init_min_p(float(cols["m"][r]), 0),
               L.llama_sampler_init_temp(float(cols["t"][r]))]
    gen = None
    if with_dist:
        smpl, gen = new_dist()
        members.append(smpl)
    for m in members:
        L.llama_sampler_chain_add(chain, owned(m))  # the chain owns and frees its members
    return chain, gen


CHAIN_PARAMS = ("last_n", "repeat", "freq", "present", "k", "p", "m", "t")


def _chain(a: dict, with_dist: bool) -> list:
    x = logits_of(a)
    B, V = x.shape
    hist = histories(a, B, V)
    cols = {n: per_row(a, n, B) for n in CHAIN_PARAMS}
    u = uniforms(a, "u", B) if with_dist else None
    if with_dist:
        require_candidates(x, "llama_cpp_chain_dist")
    out = np.empty_like(x) if not with_dist else np.empty(B, np.int64)
    for r in range(B):
        cand = Candidates(x[r])
        if cand.n == 0:
            out[r] = x[r]
            continue
        chain, gen = chain_of(V, r, cols, with_dist)
        try:
            for t in hist[r]:
                L.llama_sampler_accept(chain, t)
            if gen is not None:
                gen.next_double(float(u[r]))
            left = cand.apply(chain)
            out[r] = cand.selected_id(left) if with_dist else cand.dense(left)
        finally:
            L.llama_sampler_free(chain)
    return [out]


FUNCTIONS: dict[str, Callable[[dict], list]] = {
    "softmax": f_softmax,
    "greedy": f_greedy,
    "dist": f_dist,
    "mirostat_v2": f_mirostat_v2,
    "temp": _filter(lambda t: L.llama_sampler_init_temp(float(t)), "t"),
    "temp_ext": _filter(lambda t, d, e: L.llama_sampler_init_temp_ext(float(t), float(d), float(e)),
                        "t", "delta", "exponent"),
    "top_k": _filter(_top_k, "k"),
    "top_p": _filter(_with_min_keep(L.llama_sampler_init_top_p), "p", "min_keep", defaults={"min_keep": 0}),
    "min_p": _filter(_with_min_keep(L.llama_sampler_init_min_p), "p", "min_keep", defaults={"min_keep": 0}),
    "typical": _filter(_with_min_keep(L.llama_sampler_init_typical), "p", "min_keep", defaults={"min_keep": 0}),
    "top_n_sigma": _filter(lambda n: L.llama_sampler_init_top_n_sigma(float(n)), "n"),
    "xtc": f_xtc,
    "penalties": f_penalties,
    "logit_bias": f_logit_bias,
    "engines.llama_cpp_chain": lambda a: _chain(a, with_dist=False),
    "engines.llama_cpp_chain_dist": lambda a: _chain(a, with_dist=True),
}


# ---- start-up check and the loop -------------------------------------------------------------

def _self_check() -> None:
    """Driving works on this build: u = 0.25 and 0.75 on two equal weights pick token 0 then 1,
    and a driven output round-trips through tempering."""
    smpl, gen = new_dist()
    try:
        for u, want in ((0.25, 0), (0.75, 1), (0.4999999, 0), (0.5000001, 1)):
            cand = Candidates(np.zeros(2, np.float32))
            gen.next_double(u)
            got = cand.selected_id(cand.apply(smpl))
            if got != want:
                raise RuntimeError(f"driving llama.cpp's generator failed: u = {u} drew token {got}, not {want}")
    finally:
        L.llama_sampler_free(smpl)


def serve(inp: BinaryIO, out: BinaryIO) -> int:
    greeting = (read_line(inp) or "").split(" ")
    if len(greeting) != 2 or greeting[0] != "LOGITCHECK" or not greeting[1].isdigit() or int(greeting[1]) < 1:
        print(f"harness: expected 'LOGITCHECK <version>', got {' '.join(greeting)[:80]!r}", file=sys.stderr)
        return 2
    version = min(int(greeting[1]), VERSION)  # a judge offering a later version reads this one
    out.write(f"LOGITCHECK {version} {NAME}\n".encode())
    out.write("".join(f"FUNCTION {f}\n" for f in FUNCTIONS).encode() + b"END\n")
    out.flush()
    while True:
        line = read_line(inp)
        if line is None or line == "QUIT":
            return 0
        parts = line.split(" ")
        if parts[0] != "CALL" or len(parts) != (4 if version >= 2 else 3):
            print(f"harness: unexpected request {line[:80]!r}", file=sys.stderr)
            return 3
        tag = f"{parts[1]} " if version >= 2 else ""  # version 2 echoes the call's id in its answer
        name, nargs = parts[-2], int(parts[-1])
        args = dict(read_array(inp, read_line(inp) or "") for _ in range(nargs))
        fn = FUNCTIONS.get(name)
        try:
            if fn is None:
                raise Unsupported(f"{name} is not implemented")
            write_results(out, tag, fn(args))
        except Refused as exc:
            out.write(f"ERROR {tag}refused {exc}\n".encode())
        except Unsupported as exc:
            out.write(f"ERROR {tag}unsupported {exc}\n".encode())
        except Exception as exc:  # noqa: BLE001 - the protocol's "failed": the engine reports itself
            message = f"{type(exc).__name__}: {exc}".replace("\n", " ")
            out.write(f"ERROR {tag}failed {message}\n".encode())
        out.flush()


if __name__ == "__main__":
    _self_check()
    sys.exit(serve(sys.stdin.buffer, sys.stdout.buffer))
