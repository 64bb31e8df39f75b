"""Validation read once per public call (``gpu_impl._deferred``), tested on NumPy where the same
code runs: every public sampler reads its deferred checks at most once (a nested call, the chain's
penalties and filters, joins its caller), the error is the one the eager checks raised first, and
a check registered before any other failure wins over it. On CuPy that one read is the call's
one device -> host copy; the sync points left on the device path are listed in docs/gpu.md."""
from __future__ import annotations

import warnings
from typing import Any, Callable

import numpy as np
import pytest

import gpu_impl
from gpu_impl import _array, _deferred
from gpu_impl.engines import llama_cpp_chain, llama_cpp_chain_dist
from properties.gpu.standin import XP, Device, device_rows, stand_in_kernels

B, V = 3, 64
ROWS = np.random.default_rng(0).normal(0, 3, (B, V)).astype(np.float32)
HISTORY = np.array([[1, 2, 2], [3, -1, 4], [-1, -1, -1]])
CHAIN = (HISTORY, 3, 1.1, 0.1, 0.1, 40, 0.9, 0.05, 0.8)

CALLS: dict[str, Callable[[Any], Any]] = {
    "penalties": lambda x: gpu_impl.penalties(x, HISTORY, 3, 1.1, 0.1, 0.1),
    "penalties (no-op)": lambda x: gpu_impl.penalties(x, HISTORY, 0, 1.0, 0.0, 0.0),
    "logit_bias": lambda x: gpu_impl.logit_bias(x, np.zeros(V, np.float32)),
    "temp": lambda x: gpu_impl.temp(x, 0.8),
    "temp_ext": lambda x: gpu_impl.temp_ext(x, 0.8, 0.5, 1.0),
    "top_k": lambda x: gpu_impl.top_k(x, 5),
    "top_p": lambda x: gpu_impl.top_p(x, 0.9, 1),
    "min_p": lambda x: gpu_impl.min_p(x, 0.05, 1),
    "typical": lambda x: gpu_impl.typical(x, 0.9),
    "top_n_sigma": lambda x: gpu_impl.top_n_sigma(x, 1.0),
    "xtc": lambda x: gpu_impl.xtc(x, 0.1, 0.5, 0.05, 1),
    "greedy": gpu_impl.greedy,
    "dist": lambda x: gpu_impl.dist(x, np.array([0.1, 0.5, 0.9])),
    "mirostat_v2": lambda x: gpu_impl.mirostat_v2(x, 5.0, 0.5, 3.0, 0.1),
    "llama_cpp_chain": lambda x: llama_cpp_chain(x, *CHAIN),
    "llama_cpp_chain_dist": lambda x: llama_cpp_chain_dist(x, *CHAIN, np.array([0.1, 0.5, 0.9])),
}


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the calls of the one read function (each is one device -> host copy on CuPy)."""
    counted: list[int] = []
    real = _deferred.read_flags

    def counting(flags: list[Any]) -> list[bool]:
        counted.append(len(flags))
        return real(flags)
    monkeypatch.setattr(_deferred, "read_flags", counting)
    return counted


@pytest.mark.parametrize("name", list(CALLS))
def test_one_read_per_public_call(name: str, reads: list[int]) -> None:
    CALLS[name](ROWS)
    assert len(reads) == 1, f"{name}: {len(reads)} reads of its checks ({reads} flags), expected 1"


def test_chain_then_dist_reads_twice(reads: list[int]) -> None:
    """What the speed target times: two public calls, one read each (nine syncs before)."""
    gpu_impl.dist(llama_cpp_chain(ROWS, *CHAIN), np.array([0.1, 0.5, 0.9]))
    assert len(reads) == 2


def test_nested_calls_join_their_caller(reads: list[int]) -> None:
    """The unfused chain calls penalties, top_k, top_p, min_p and temp: their checks (a NaN check
    each; the history, on the host, is checked at once) are read with the chain's, once."""
    llama_cpp_chain(ROWS, *CHAIN)
    assert len(reads) == 1 and reads[0] == 5, reads  # penalties' and the four filters' NaN checks


def test_outside_a_public_call_a_check_reads_at_once(reads: list[int]) -> None:
    bad = ROWS.copy()
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match=r"logits rows \[1\] contain NaN"):
        _array.as_logits(bad)
    assert len(reads) == 1


NAN = ROWS.copy()
NAN[1, 3] = np.nan
EMPTY = ROWS.copy()
EMPTY[0] = -np.inf
BOTH = EMPTY.copy()
BOTH[1, 3] = np.nan
NAN_MSG = r"logits rows \[1\] contain NaN or \+inf \(after conversion to float32\)"

# (call, message): each call has two faults or more; the message is the one the eager checks
# raised first (recorded from the code before the checks were deferred, and unchanged)
PRECEDENCE: list[tuple[str, Callable[[], Any], str]] = [
    ("NaN logits before a host parameter error", lambda: gpu_impl.dist(NAN, 2.0), NAN_MSG),
    ("NaN logits before an empty row", lambda: gpu_impl.greedy(BOTH), NAN_MSG),
    ("empty row before u outside [0, 1]", lambda: gpu_impl.dist(EMPTY, -0.5),
     r"dist: rows \[0\] have no finite logit to select"),
    ("NaN logits before a history of the wrong shape", lambda: gpu_impl.penalties(NAN, HISTORY[:1], 3, 1.1, 0, 0),
     NAN_MSG),
    ("history ids before repeat <= 0",
     lambda: gpu_impl.penalties(ROWS, np.array([[1, 99], [0, 0], [0, 0]]), 3, 0.0, 0, 0),
     rf"history rows \[0\] hold ids outside \[-1, {V}\) \(-1 is padding\)"),
    ("history ids (>= V, not indexed meanwhile) alone",
     lambda: gpu_impl.penalties(ROWS, np.array([[1, 10 ** 9], [0, 0], [0, 0]]), 3, 1.1, 0.5, 0),
     rf"history rows \[0\] hold ids outside \[-1, {V}\)"),
    ("bias NaN before nothing else", lambda: gpu_impl.logit_bias(ROWS, np.full(V, np.nan)),
     r"bias contains NaN or \+inf \(rows \[0\] of the bias\)"),
    ("chain: penalties' NaN before k's shape", lambda: llama_cpp_chain(NAN, *CHAIN[:5], np.ones(2), *CHAIN[6:]),
     NAN_MSG),
    ("chain: an overflow to +inf by the penalties before t's NaN",
     lambda: llama_cpp_chain(np.full((B, V), 3e38, np.float32), HISTORY, 3, 1e-3, 0, 0, 40, 0.9, 0.05, np.nan),
     r"logits rows \[0, 1\] contain NaN or \+inf"),
    ("chain + dist: empty row before u's range", lambda: llama_cpp_chain_dist(EMPTY, *CHAIN, 3.0),
     r"dist: rows \[0\] have no finite logit to select"),
    ("host parameter error with valid data", lambda: gpu_impl.top_p(ROWS, 0.9, -1),
     r"parameter min_keep must be >= 0, got \[-1, -1, -1\]"),
]


@pytest.mark.parametrize("case", PRECEDENCE, ids=[c[0] for c in PRECEDENCE])
def test_first_failing_check_wins(case: tuple[str, Callable[[], Any], str], reads: list[int]) -> None:
    _, call, message = case
    with pytest.raises(ValueError, match=message):
        call()
    assert len(reads) <= 1


def test_a_failing_flag_wins_over_a_later_exception() -> None:
    """Code after a failing flag runs on invalid data: whatever it raises, the flag's error is
    the one raised (the eager check never let the code get there); without a failing flag the
    exception passes unchanged."""
    @_deferred.validated
    def broken(fail: bool) -> None:
        _deferred.check(np.array([False, fail]), lambda: "the flag's message")
        raise KeyError("a consequence of invalid data")

    with pytest.raises(ValueError, match="the flag's message"):
        broken(True)
    with pytest.raises(KeyError):
        broken(False)


def test_passing_checks_return_the_result() -> None:
    @_deferred.validated
    def fine() -> int:
        _deferred.check(np.zeros(3, bool), lambda: "never")
        return 7
    assert fine() == 7


@pytest.mark.parametrize("value, integer, dtype, message", [
    (np.array([1.0, np.inf, 2.0], np.float32), False, np.float32,
     r"parameter q must be finite \(in float32\), got \[1.0, inf, 2.0\]"),
    (np.array([0.5, np.nan, 2.0], np.float32), False, np.float64,
     r"parameter q must be finite \(in float64\), got \[0.5, nan, 2.0\]"),
    (np.array([1.0, 2.0], np.float32), False, np.float32, r"parameter q has shape \(2,\) but batch is 3"),
    (np.array([True, False, True]), True, np.float32, r"parameter q must be numeric, got dtype bool"),
])
def test_device_parameter_checks_say_what_the_host_says(value: np.ndarray, integer: bool, dtype: Any,
                                                        message: str) -> None:
    """A parameter handed over on the device is checked there (a deferred flag, NumPy standing in
    for CuPy here) with the host check's message."""
    with pytest.raises(ValueError, match=message):
        _array.row_param(value, B, "q", np, integer=integer, dtype=dtype)

    @_deferred.validated
    def on_device() -> Any:
        return _array._device_row_param(value, B, "q", np, integer, dtype)
    with pytest.raises(ValueError, match=message):
        on_device()


def test_device_parameter_conversions_are_exact() -> None:
    """float32 -> float64 widened exactly (subnormals kept), integers as int64; float64 ->
    float32 is left to the host (CuPy's conversion flushes float32 subnormals)."""
    sub = np.array([1e-45, 0.5, 1.0], np.float32)
    assert _array._device_row_param(sub, B, "u", np, False, np.float64).tolist() == sub.astype(np.float64).tolist()
    assert _array._device_row_param(np.array([1, 2, 3], np.int32), B, "k", np, True, np.float32).dtype == np.int64
    assert _array._device_row_param(np.array([1.0, 2, 3]), B, "p", np, False, np.float32) is None
    assert _array._device_row_param(np.array([1.0, 2, 3], np.float32), B, "k", np, True, np.float32) is None


def test_the_counter_sees_eager_reads(reads: list[int]) -> None:
    """Both ways: the same two checks read once inside a public call and twice outside one, so
    a sampler that went back to reading eagerly fails test_one_read_per_public_call."""
    _deferred.validated(lambda: (_array.as_logits(ROWS), _array.as_logits(ROWS)))()
    assert len(reads) == 1
    _array.as_logits(ROWS), _array.as_logits(ROWS)
    assert len(reads) == 3




@pytest.mark.parametrize("u, message", [
    (np.array([0.1, np.nan, 0.5]), r"parameter u must be finite \(in float64\), got \[0.1, nan, 0.5\]"),
    (np.array([0.1, 1.5, -0.5]), r"parameter u must lie in \[0, 1\], got \[0.1, 1.5, -0.5\]"),
    (np.array([0.1, -1e-45, 0.5], np.float32), r"must lie in \[0, 1\]"),
])
def test_device_uniform_one_flag_host_message(u: np.ndarray, message: str, reads: list[int]) -> None:
    """A uniform given on the device is checked by one flag (NaN and inf fail the range test);
    the message is the host checks' own. float32 is widened exactly: a negative subnormal, which
    CuPy's float32 comparison would read as 0, is refused as on the host."""
    with pytest.raises(ValueError, match=message):
        _array.unit_param(u, B, "u", np)
    with pytest.raises(ValueError, match=message):
        _deferred.validated(lambda: _array.unit_param(u.view(Device), B, "u", XP))()
    assert len(reads) == 1
    ok = np.array([0.0, 0.5, 1.0], np.float32).view(Device)
    assert _deferred.validated(lambda: _array.unit_param(ok, B, "u", XP))().tolist() == [0.0, 0.5, 1.0]


def test_device_history_checked_by_a_flag_and_sanitised(reads: list[int]) -> None:
    """History ids on the device are checked by a deferred flag (after the NaN check registered
    before them, before a host error after them), and ids outside the row become padding meanwhile."""
    from gpu_impl.penalties import _history
    h = np.array([[1, 99], [0, -7], [2, 2]]).view(Device)
    message = rf"history rows \[0, 1\] hold ids outside \[-1, {V}\) \(-1 is padding\)"
    seen: list[Any] = []

    def call() -> None:
        seen.append(_history(XP, h, B, V))
        raise KeyError("a host error after the check")
    with pytest.raises(ValueError, match=message):
        _deferred.validated(call)()
    assert np.asarray(seen[0]).tolist() == [[1, -1], [0, -1], [2, 2]]
    assert len(reads) == 1


@pytest.mark.parametrize("p", [1e-45, 1e-30, 0.05, 0.5, float(np.nextafter(np.float32(1), np.float32(0))), 1.0])
def test_min_p_at_most_1_keeps_the_row_max(p: float) -> None:
    """Why min_p on the device skips its fallback's read when every row has p <= 1 and
    min_keep <= 1: the threshold max + ln p (float32, ln p taken in double as the kernel does,
    or in float32 as the array path) never exceeds the max, so the max survives and no row is
    short. Both ways: p just above 1 can leave a row with no survivor."""
    rows = np.concatenate([ROWS, np.array([[3e38, -3e38] * (V // 2), [1e-45] * V, [-np.inf] * V], np.float32)])
    row_max = rows.max(axis=1)
    for log_p in (np.float32(np.log(np.float64(np.float32(p)))), np.log(np.float32(p))):
        with np.errstate(invalid="ignore"):
            assert ((rows >= (row_max + log_p)[:, None]).sum(axis=1) >= 1).all()
    above = np.float32(1.5)
    assert ((ROWS >= (ROWS.max(axis=1) + np.log(above))[:, None]).sum(axis=1) == 0).all()


def test_every_public_sampler_is_a_public_call() -> None:
    """Each public sampler of gpu_impl's sampler modules reads its checks once (softmax, whose
    one check reads at once, and rejection_sample live elsewhere and read as before)."""
    names = [n for n in gpu_impl.__all__ if n not in ("softmax", "rejection_sample")]
    assert len(names) == 13
    for fn in [getattr(gpu_impl, n) for n in names] + [llama_cpp_chain, llama_cpp_chain_dist]:
        assert getattr(fn, "__wrapped__", None) is not None, f"{fn.__name__} is not wrapped by _deferred.validated"


@pytest.mark.parametrize("name", list(CALLS))
def test_cupy_array_path_with_numpy_standing_in(name: str, monkeypatch: pytest.MonkeyPatch,
                                                reads: list[int]) -> None:
    """The CuPy branches of the array path (rows the kernels do not take), run with NumPy as the
    array module and the rows as a device value: the same result as on NumPy, one read."""
    cupyx = pytest.importorskip("cupyx")
    import gpu_impl.kernels
    monkeypatch.setattr(gpu_impl.kernels, "fits", lambda shape: False)
    device_rows(monkeypatch)
    monkeypatch.setattr(cupyx, "scatter_add", np.add.at)
    want = CALLS[name](ROWS)
    reads.clear()
    got = CALLS[name](ROWS.view(Device))
    for a, b in zip(want if isinstance(want, tuple) else (want,), got if isinstance(got, tuple) else (got,)):
        np.testing.assert_array_equal(np.asarray(b), np.asarray(a))
    assert len(reads) == 1


@pytest.fixture
def fake_kernels(monkeypatch: pytest.MonkeyPatch) -> None:
    """The device path's orchestration on the CPU (``properties.gpu.standin``), each call eager
    (graph replay is tested in test_graph_replay.py)."""
    monkeypatch.setenv("LOGITCHECK_GRAPHS", "0")
    device_rows(monkeypatch)
    stand_in_kernels(monkeypatch)


def _device_call(rows: np.ndarray, u: Any, fused: bool) -> Any:
    h = np.full((rows.shape[0], 1), -1).view(Device)
    args = (h, 0, 1.0, 0.0, 0.0, 40, 0.95, 0.05, 0.8)
    x = rows.view(Device)
    return llama_cpp_chain_dist(x, *args, u) if fused else gpu_impl.dist(llama_cpp_chain(x, *args), u)


@pytest.mark.parametrize("fused", [False, True], ids=["chain then dist", "llama_cpp_chain_dist"])
def test_device_chain_and_dist_orchestration(fused: bool, fake_kernels: None, reads: list[int],
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """As test_public_chain_speed calls them (history and u on the device): the ids of the NumPy
    path, one read per public call (2 for chain then dist, 9 before; 1 for llama_cpp_chain_dist,
    which hands dist the row max the chain wrote instead of a second row-max pass); the same
    errors."""
    import gpu_impl.kernels as kernels
    passes: list[int] = []
    row_max = kernels.row_max
    monkeypatch.setattr(kernels, "row_max", lambda x: (passes.append(1), row_max(x))[1])
    u = np.array([0.1, 0.5, 0.9])
    want = gpu_impl.dist(llama_cpp_chain(ROWS, np.full((B, 1), -1), 0, 1.0, 0.0, 0.0, 40, 0.95, 0.05, 0.8), u)
    reads.clear()
    np.testing.assert_array_equal(np.asarray(_device_call(ROWS, u.view(Device), fused)), want)
    assert len(reads) == (1 if fused else 2)
    assert len(passes) == (1 if fused else 2)
    with pytest.raises(ValueError, match=NAN_MSG):
        _device_call(NAN, u.view(Device), fused)
    with pytest.raises(ValueError, match=r"dist: rows \[0\] have no finite logit to select"):
        _device_call(EMPTY, np.array([0.1, 2.0, 0.5]).view(Device), fused)
    with pytest.raises(ValueError, match=r"parameter u must lie in \[0, 1\], got \[0.1, 2.0, 0.5\]"):
        _device_call(ROWS, np.array([0.1, 2.0, 0.5]).view(Device), fused)
    huge = np.full((B, V), 3e38, np.float32)  # t = 0.8 overflows every kept logit to +inf
    with pytest.raises(ValueError, match=r"logits rows \[0, 1, 2\] contain NaN or \+inf"):
        _device_call(huge, u.view(Device), fused)


POSINF = ROWS.copy()
POSINF[2, 5] = np.inf


@pytest.mark.parametrize("bad", [NAN, POSINF, EMPTY], ids=["nan", "posinf", "all_neginf"])
@pytest.mark.parametrize("name", list(CALLS))
def test_a_refusal_warns_nothing(name: str, bad: np.ndarray) -> None:
    """The computation that runs on invalid data until the flags are read raises no NumPy
    warning: the caller sees the ValueError alone (or, for a row the call accepts, its result)."""
    with warnings.catch_warnings(record=True) as caught:  # recorded: raised, a warning would
        warnings.simplefilter("always")                  # become the flag's ValueError
        try:
            CALLS[name](bad.copy())
        except ValueError:
            pass
    assert not caught, [str(w.message) for w in caught]


def test_a_refused_bias_warns_nothing() -> None:
    """A +inf bias on a -inf logit: refused, and the sum computed meanwhile warns nothing."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(ValueError, match="bias contains NaN or"):
            gpu_impl.logit_bias(EMPTY, np.full(V, np.inf, np.float32))  # -inf + inf on row 0
    assert not caught, [str(w.message) for w in caught]
