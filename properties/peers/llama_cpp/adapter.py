"""A thin adapter over llama.cpp's own CPU samplers, via llama-cpp-python's ctypes bindings.

No model is needed: ``llama_sampler_apply`` works on any ``llama_token_data_array``. The
candidate array is a ctypes buffer viewed by NumPy (``TOKEN_DATA``), so a 262,144-token row is
filled and read back without Python loops.

Factories mirror the oracle's (``oracle.samplers``) names and parameter order. Calls that could
crash the interpreter (DRY without a vocabulary, DRY's C++-only token-breaker entry point) are
first run in a child process (``probe``); a sampler whose probe failed raises ``Unavailable``.
"""
from __future__ import annotations

import ctypes
import functools
import json
import subprocess
import sys
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from properties.packages import checkout_env
from properties.peers.legality import PeerOutput  # the answer form the one judge reads

TOKEN_DATA = np.dtype([("id", "<i4"), ("logit", "<f4"), ("p", "<f4")])
PINNED_VERSION = "0.3.36"
# llama_sampler_init_dry_testing(float, float, int, int, const std::vector<std::vector<int>>&):
# exported with C++ linkage only; it takes DRY breakers as token-id sequences (no vocabulary).
_DRY_TESTING = "_Z30llama_sampler_init_dry_testingffiiRKSt6vectorIS_IiSaIiEESaIS1_EE"
_REPO_ROOT = Path(__file__).resolve().parents[3]


class Unavailable(RuntimeError):
    """The peer (or this sampler of it) cannot be exercised here; the message says why."""


def _import():
    try:
        import llama_cpp
    except Exception as exc:  # ImportError, or OSError when the shared library fails to load
        raise Unavailable(f"llama_cpp is not importable: {type(exc).__name__}: {exc}") from exc
    return llama_cpp


def available() -> str | None:
    """None when llama.cpp's samplers can be called here, else the reason they cannot."""
    try:
        L = _import()
    except Unavailable as exc:
        return str(exc)
    version = getattr(L, "__version__", "?")
    if ctypes.sizeof(L.llama_token_data) != TOKEN_DATA.itemsize:
        return f"llama_token_data is {ctypes.sizeof(L.llama_token_data)} bytes, expected {TOKEN_DATA.itemsize}"
    if version != PINNED_VERSION:
        return f"llama-cpp-python {version} is installed; the findings are pinned to {PINNED_VERSION}"
    return None


class PeerSampler:
    """One ``llama_sampler *``. Free it (or use ``with``) unless a chain owns it."""

    def __init__(self, ptr: Any, keepalive: tuple = ()) -> None:
        if not ptr:
            raise Unavailable("llama.cpp returned a NULL sampler")
        self._L = _import()
        self._ptr = ptr
        self._owned = True
        self._keepalive = keepalive  # buffers the sampler was built from

    @property
    def name(self) -> str:
        return self._L.llama_sampler_name(self._ptr).decode()

    def apply(self, state: Any) -> PeerOutput:
        """``llama_sampler_apply`` on fp32 logits (ids 0..n-1, p = 0, unsorted) or on a
        TokenDataArray-like state (``ids``, ``logits``, ``p``, ``sorted``, ``selected``)."""
        L = self._L
        if isinstance(state, np.ndarray):
            logits = np.asarray(state)
            if logits.ndim != 1:
                raise ValueError(f"logits must be 1-D, got shape {logits.shape}")
            ids, p, is_sorted, selected = np.arange(logits.size), 0.0, False, -1
        else:
            logits, ids, p = state.logits, state.ids, state.p
            is_sorted, selected = bool(state.sorted), int(state.selected)
        n = int(np.asarray(logits).size)
        buf = (L.llama_token_data * max(n, 1))()
        view = np.frombuffer(buf, dtype=TOKEN_DATA)[:n]
        view["id"], view["logit"], view["p"] = ids, logits, p
        arr = L.llama_token_data_array(data=buf, size=n, selected=selected, sorted=is_sorted)
        L.llama_sampler_apply(self._ptr, ctypes.byref(arr))
        # samplers may advance the data pointer (XTC drops the head of the array that way)
        start = (ctypes.cast(arr.data, ctypes.c_void_p).value - ctypes.addressof(buf)) // TOKEN_DATA.itemsize
        out = view[start:start + arr.size]
        return PeerOutput(out["id"].astype(np.int64), out["logit"].copy(), out["p"].copy(),
                          int(arr.selected), bool(arr.sorted))

    def sample(self, logits: np.ndarray) -> int:
        """``llama_sampler_sample`` without a context: apply to raw logits, accept the token."""
        out = self.apply(np.asarray(logits, dtype=np.float32))
        if not 0 <= out.selected < out.ids.size:
            raise ValueError(f"{self.name}: no token selected (selected={out.selected}, size={out.ids.size})")
        token = int(out.ids[out.selected])
        self.accept(token)
        return token

    def accept(self, token: int) -> None:
        self._L.llama_sampler_accept(self._ptr, int(token))

    def reset(self) -> None:
        self._L.llama_sampler_reset(self._ptr)

    def free(self) -> None:
        if self._owned and self._ptr:
            self._L.llama_sampler_free(self._ptr)
        self._ptr = None

    def __enter__(self) -> "PeerSampler":
        return self

    def __exit__(self, *exc: object) -> None:
        self.free()

    def __del__(self) -> None:
        try:
            self.free()
        except Exception:
            pass


def _lib():
    return _import()


def greedy() -> PeerSampler:
    return PeerSampler(_lib().llama_sampler_init_greedy())


def dist(seed: int) -> PeerSampler:
    return PeerSampler(_lib().llama_sampler_init_dist(seed))


def temp(t: float) -> PeerSampler:
    return PeerSampler(_lib().llama_sampler_init_temp(t))


def temp_ext(t: float, delta: float, exponent: float) -> PeerSampler:
    return PeerSampler(_lib().llama_sampler_init_temp_ext(t, delta, exponent))


def top_k(k: int) -> PeerSampler:
    return PeerSampler(_lib().llama_sampler_init_top_k(k))


def top_p(p: float, min_keep: int = 0) -> PeerSampler:
    return PeerSampler(_lib().llama_sampler_init_top_p(p, min_keep))


def min_p(p: float, min_keep: int = 0) -> PeerSampler:
    return PeerSampler(_lib().llama_sampler_init_min_p(p, min_keep))


def typical(p: float, min_keep: int = 0) -> PeerSampler:
    return PeerSampler(_lib().llama_sampler_init_typical(p, min_keep))


def xtc(probability: float, threshold: float, min_keep: int = 0, seed: int = 0) -> PeerSampler:
    return PeerSampler(_lib().llama_sampler_init_xtc(probability, threshold, min_keep, seed))


def top_n_sigma(n: float) -> PeerSampler:
    return PeerSampler(_lib().llama_sampler_init_top_n_sigma(n))


def penalties(last_n: int, repeat: float, freq: float, present: float, n_vocab: int = 262144) -> PeerSampler:
    # llama-cpp-python 0.3.36's C signature takes n_vocab first (used by backend sampling only)
    return PeerSampler(_lib().llama_sampler_init_penalties(n_vocab, last_n, repeat, freq, present))


def logit_bias(n_vocab: int, biases: Any) -> PeerSampler:
    L = _lib()
    pairs = list(biases.items()) if isinstance(biases, dict) else list(biases)
    arr = (L.llama_logit_bias * max(len(pairs), 1))(*[L.llama_logit_bias(int(t), float(b)) for t, b in pairs])
    return PeerSampler(L.llama_sampler_init_logit_bias(n_vocab, len(pairs), arr), keepalive=(arr,))


def mirostat(n_vocab: int, seed: int, tau: float, eta: float, m: int = 100) -> PeerSampler:
    return PeerSampler(_lib().llama_sampler_init_mirostat(n_vocab, seed, tau, eta, m))


def mirostat_v2(seed: int, tau: float, eta: float) -> PeerSampler:
    return PeerSampler(_lib().llama_sampler_init_mirostat_v2(seed, tau, eta))


def adaptive_p(target: float, decay: float, seed: int) -> PeerSampler:
    return PeerSampler(_lib().llama_sampler_init_adaptive_p(target, decay, seed))


class _StdVector(ctypes.Structure):
    # libstdc++'s std::vector<T>: three pointers (begin, end, end of storage)
    _fields_ = [("begin", ctypes.c_void_p), ("end", ctypes.c_void_p), ("cap", ctypes.c_void_p)]


@functools.lru_cache(maxsize=1)
def _dry_testing_fn() -> Any:
    """The C++ entry point with its prototype, set once: long streams judge samplers on several
    threads, and a prototype being (re)set on one while another calls it passes wrong arguments."""
    lib = ctypes.CDLL(str(Path(_lib().__file__).parent / "lib" / "libllama.so"))  # own handle, own prototypes
    fn = getattr(lib, _DRY_TESTING)
    fn.restype, fn.argtypes = ctypes.c_void_p, [ctypes.c_float, ctypes.c_float, ctypes.c_int32, ctypes.c_int32,
                                                 ctypes.POINTER(_StdVector)]
    return fn


def _dry_testing(multiplier: float, base: float, allowed_length: int, last_n: int,
                 breakers: Sequence[Sequence[int]]) -> Any:
    """Call the C++ ``llama_sampler_init_dry_testing`` with a hand-built vector<vector<int>>;
    it copies the breakers, so the buffers only need to live for the call."""
    L, fn = _lib(), _dry_testing_fn()
    rows = [(ctypes.c_int32 * max(len(b), 1))(*[int(t) for t in b]) for b in breakers]
    inner = (_StdVector * max(len(rows), 1))()
    for vec, row, b in zip(inner, rows, breakers):
        start = ctypes.addressof(row)
        vec.begin, vec.end, vec.cap = start, start + 4 * len(b), start + 4 * len(b)
    start = ctypes.addressof(inner)
    outer = _StdVector(start, start + ctypes.sizeof(_StdVector) * len(rows), start + ctypes.sizeof(_StdVector) * len(rows))
    ptr = fn(multiplier, base, allowed_length, last_n, ctypes.byref(outer))
    return ctypes.cast(ptr, L.llama_sampler_p_ctypes)


def dry(multiplier: float, base: float, allowed_length: int, last_n: int,
        breakers: Sequence[Sequence[int]] = ()) -> PeerSampler:
    """DRY with token-id breakers (``llama_sampler_init_dry_testing``) or, without breakers,
    ``llama_sampler_init_dry`` with a NULL vocabulary (it only reads the vocabulary to tokenise
    string breakers)."""
    # llama_sampler_init_dry_testing with disabling parameters dereferences the no-op sampler's
    # context as a DRY context and segfaults (finding "dry-testing-disabled-segfault"): a disabled
    # DRY goes through llama_sampler_init_dry, which returns the no-op sampler safely
    # decided on the values llama.cpp receives (float32, int32): a multiplier of 1e-50 is 0 there,
    # and last_n < 0 disables it as 0 does; an in-process call with either crashed pytest-xdist
    # workers (nightly, intermittently: only the draws with a negative last_n and breakers)
    m32, b32 = np.float32(multiplier), np.float32(base)
    n32 = ctypes.c_int32(int(last_n)).value
    enabled = bool(m32 != 0) and bool(b32 >= 1) and n32 > 0
    if breakers and enabled:
        reason = probe().get("dry_testing")
        if reason:
            raise Unavailable(f"dry with token breakers: {reason}")
        return PeerSampler(_dry_testing(multiplier, base, allowed_length, last_n, breakers))
    reason = probe().get("dry_null_vocab")
    if reason:
        raise Unavailable(f"dry without a vocabulary: {reason}")
    L = _lib()
    return PeerSampler(L.llama_sampler_init_dry(None, multiplier, base, allowed_length, last_n, None, 0))


def chain(members: Sequence[PeerSampler]) -> PeerSampler:
    """``llama_sampler_chain_init`` + ``chain_add``: the chain takes ownership of its members."""
    L = _lib()
    ptr = L.llama_sampler_chain_init(L.llama_sampler_chain_default_params())
    for m in members:
        L.llama_sampler_chain_add(ptr, m._ptr)
        m._owned = False
    return PeerSampler(ptr, keepalive=tuple(members))


# ---- crash-safe probing of the risky entry points ------------------------------------------

def _probe_dry(make) -> str | None:
    smp = make()
    for t in (1, 2, 3, 1, 2):
        smp.accept(t)
    out = smp.apply(np.zeros(5, dtype=np.float32))
    smp.free()
    # history 1 2 3 1 2: the suffix "1 2" repeats, so token 3 (which would extend it) gets
    # multiplier * base^0 = 1 subtracted; nothing else moves
    expected = np.array([0, 0, 0, -1, 0], dtype=np.float32)
    return None if np.array_equal(out.logits, expected) else f"unexpected penalties {out.logits.tolist()}"


def _probe_main() -> None:
    report = {}
    for key, make in {"dry_null_vocab": lambda: PeerSampler(_lib().llama_sampler_init_dry(None, 1.0, 1.75, 2, 64, None, 0)),
                      "dry_testing": lambda: PeerSampler(_dry_testing(1.0, 1.75, 2, 64, [[7], [8, 9]]))}.items():
        try:
            report[key] = _probe_dry(make)
        except Exception as exc:
            report[key] = f"{type(exc).__name__}: {exc}"
        print(json.dumps(report), flush=True)  # partial report survives a later crash


@functools.lru_cache(maxsize=1)
def probe() -> dict[str, str | None]:
    """Run the risky calls in a child process; {probe: None if it worked, else why not}."""
    keys = ("dry_null_vocab", "dry_testing")
    env = checkout_env()
    try:
        proc = subprocess.run([sys.executable, "-m", "properties.peers.llama_cpp.adapter", "--probe"], cwd=_REPO_ROOT,
                              env=env, capture_output=True, text=True, timeout=120)
    except subprocess.TimeoutExpired:
        return {k: "probe timed out" for k in keys}
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    report = json.loads(lines[-1]) if lines else {}
    crashed = f"probe process died (exit {proc.returncode}): {proc.stderr.strip()[-200:]}"
    return {k: report[k] if k in report else crashed for k in keys}


def crash_witness_dry_testing_disabled(multiplier: float = 0.0, last_n: int = 64) -> int:
    """Exit status of a child process that calls llama_sampler_init_dry_testing(multiplier, 1.75, 2,
    last_n, {{1}}): a negative status is the signal that killed it."""
    env = checkout_env()
    proc = subprocess.run([sys.executable, "-m", "properties.peers.llama_cpp.adapter", "--dry-testing-disabled",
                           repr(float(multiplier)), str(int(last_n))],
                          cwd=_REPO_ROOT, env=env, capture_output=True, text=True, timeout=120)
    return proc.returncode


if __name__ == "__main__" and "--probe" in sys.argv:
    _probe_main()
if __name__ == "__main__" and "--dry-testing-disabled" in sys.argv:
    _at = sys.argv.index("--dry-testing-disabled")
    PeerSampler(_dry_testing(float(sys.argv[_at + 1]), 1.75, 2, int(sys.argv[_at + 2]), [[1]])).free()
