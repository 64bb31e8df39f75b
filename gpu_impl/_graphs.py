"""Public calls on CuPy rows replayed from a CUDA graph.

Why: a validated public call launches some 40 kernels from Python, and at 64 x 262,144 its host
work, not its kernels, set its time (an H100 took 1,667 us for chain + dist against 247 us for the
same kernels replayed from a graph; docs/gpu.md). A decode loop calls a sampler again and again
with the same shapes and parameters, so the second time a call is seen, its device work (checks
included) is captured into a graph, and later calls with the same key copy their inputs in,
launch the graph and read its one check flag.

The key of a call: the function, the device, the stream, and per argument
  * a CuPy array (the logits, a history, uniforms): its shape and dtype; it is copied into the
    graph's own buffer, so the key does not depend on where the caller's array lives;
  * a host value named as per-row data (``u``: a fresh draw every call): its batch; converted to
    float64 on the host and uploaded into the graph's buffer, when it is a valid uniform;
  * any other host value (k, p, t, a host history): its content.
Anything else (keywords, a value the key cannot hold, a call inside another public call, a
capture already under way) runs the eager call.

Arrays of ``IN_PLACE_BYTES`` or more (the logits: a 64 x 262,144 copy moves 134 MB, 45 us at
the 2,954 GB/s device-to-device copy measured on an H100, docs/gpu.md) also key a second graph by their addresses and strides, captured when
the same addresses come twice: it reads them where they are, as the eager call does, which is
right whatever array is there now (a decode loop's logits, freed and reallocated, usually come
back at the same address). The graph never holds the caller's array.

What a replay returns is what the eager call returns: the graph is captured from the call's own
code (its ``ValueError`` checks become device flags), then launched once on the call that
captured it and compared with that call's eager result bit for bit; a key whose capture fails
(the code read the device, or uploaded host data) or whose result differs is never replayed.
When a replay's flag says a check failed, the eager call runs on the same arguments and raises
its own error. The returned arrays are copies, never the graph's buffers.

Memory: each graph keeps its intermediates in a private pool (the fused chain's [B, V] float32
output among them: 64 MiB at 64 x 262,144); at most ``MAX_GRAPHS`` are kept, least recently used first out. ``LOGITCHECK_GRAPHS=0``
turns replay off. A graph freezes the code that captured it: code that patches gpu_impl's
internals while it runs (a test's stand-in kernels) turns replay off or calls ``clear()``.
"""
from __future__ import annotations

import contextvars
import functools
import inspect
import os
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Callable, TypeVar

import numpy as np

from gpu_impl import _deferred

F = TypeVar("F", bound=Callable[..., Any])
MAX_GRAPHS = 8
IN_PLACE_BYTES = 1 << 20
MAX_SEEN = 256  # keys seen once and not yet captured, and keys refused (a churning key never fills memory)
MAX_CONSTANTS, CONSTANT_BYTES = 256, 1 << 16


class NotReplayable(Exception):
    """A call whose device work cannot be a graph (its reason says why)."""


@dataclass
class Entry:
    graph: Any
    statics: list[Any]  # per argument: the graph's own buffer, or None (a host value of the key)
    out: Any            # the captured outputs: an array or a tuple of arrays
    flag: Any           # 0-d: some check of the call failed (None when the call has none)
    owner: Any          # what keeps the graph's intermediates allocated
    keep: list[Any]     # device constants the graph reads (uploaded before it, outside its pool)


@dataclass
class Stats:
    captures: int = 0
    replays: int = 0
    in_place: int = 0  # of the replays, those reading the large arguments where they are
    eager: int = 0
    refused: dict[str, int] = field(default_factory=dict)


STATS = Stats()
_LOCK = threading.RLock()
_GRAPHS: OrderedDict[tuple, Entry] = OrderedDict()
_SEEN: OrderedDict[tuple, int] = OrderedDict()
_REFUSED: OrderedDict[tuple, str] = OrderedDict()
_CONSTANTS: OrderedDict[tuple, Any] = OrderedDict()
_KEEP: contextvars.ContextVar[list[Any] | None] = contextvars.ContextVar("gpu_impl_graph_keep", default=None)


def enabled() -> bool:
    return os.environ.get("LOGITCHECK_GRAPHS", "1") != "0"


def clear() -> None:
    """Forget every graph (their memory returns to CuPy once no replay holds it)."""
    with _LOCK:
        _GRAPHS.clear()
        _SEEN.clear()
        _REFUSED.clear()
        _CONSTANTS.clear()


def upload(xp: Any, host: Any) -> Any:
    """``xp.asarray(host)`` for a small parameter held on the host, kept on the device by its
    content: a repeated call uploads nothing, and a graph's capture (where a host -> device copy
    is refused) finds it there. The kernels only read parameters (``const`` pointers), so a
    constant is shared safely. A graph being captured keeps the constants it reads."""
    from gpu_impl._array import is_cupy, on_host
    if not is_cupy(xp) or not on_host(host):
        return xp.asarray(host)
    arr = np.ascontiguousarray(host)
    if arr.nbytes > CONSTANT_BYTES:
        return xp.asarray(arr)
    cuda = getattr(xp, "cuda", None)  # None for an array module standing in for CuPy (tests)
    key = (cuda.runtime.getDevice() if cuda is not None else -1, arr.dtype.str, arr.shape, arr.tobytes())
    with _LOCK:
        dev = _CONSTANTS.get(key)
        if dev is None:
            dev = _CONSTANTS[key] = xp.asarray(arr)
            while len(_CONSTANTS) > MAX_CONSTANTS:
                _CONSTANTS.popitem(last=False)
        else:
            _CONSTANTS.move_to_end(key)
    keep = _KEEP.get()
    if keep is not None:
        keep.append(dev)
    return dev


class CupyGraphs:
    """The CUDA side: capture on a side stream into a private memory pool, launch on the current
    stream. (Tests put a NumPy stand-in here.)"""

    def device(self) -> int:
        import cupy
        return int(cupy.cuda.runtime.getDevice())

    def stream(self) -> int:
        import cupy
        return int(cupy.cuda.get_current_stream().ptr)

    def capturing(self) -> bool:
        import cupy
        return bool(cupy.cuda.get_current_stream().is_capturing())

    def capture(self, body: Callable[[], Any]) -> tuple[Any, Any, Any]:
        import cupy
        pool, stream = cupy.cuda.MemoryPool(), cupy.cuda.Stream(non_blocking=True)
        stream.wait_event(cupy.cuda.get_current_stream().record())  # the inputs copied in first
        with cupy.cuda.using_allocator(pool.malloc), stream:
            body()  # once eagerly on the side stream: the pool holds the blocks the capture reuses
            stream.synchronize()
            stream.begin_capture()
            try:
                out = body()
            except BaseException:
                try:
                    stream.end_capture()
                except Exception:  # an invalidated capture: its error is the body's
                    pass
                raise
            graph = stream.end_capture()
        return graph, out, (pool, stream)

    def launch(self, graph: Any) -> None:
        graph.launch()


BACKEND: Any = CupyGraphs()


def _on_device(a: Any) -> bool:
    return hasattr(a, "get") and hasattr(a, "shape") and hasattr(a, "dtype")


def _host_key(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return (type(value).__name__, value)
    if isinstance(value, (np.ndarray, np.generic, list, tuple)):
        arr = np.asarray(value)
        if arr.dtype.kind not in "biuf":
            raise NotReplayable("a host value that is not numeric")
        return (arr.dtype.str, arr.shape, arr.tobytes())
    raise NotReplayable(f"a host value of type {type(value).__name__}")


def _uniform(value: Any, batch: int) -> np.ndarray | None:
    """A host per-row uniform as the call would take it (float64 [batch] in [0, 1]), else None
    (the eager call then gives the error)."""
    try:
        arr = np.asarray(value)
    except Exception:
        return None
    if arr.dtype.kind not in "iuf" or arr.ndim > 1 or (arr.ndim == 1 and arr.shape != (batch,)):
        return None
    arr = np.ascontiguousarray(np.broadcast_to(arr.astype(np.float64), (batch,)))
    return arr if bool(((arr >= 0) & (arr <= 1)).all()) else None


@dataclass
class _Call:
    key: tuple
    roles: list[str]       # per argument: "copied", "uploaded", "host"
    values: list[Any]      # per argument: what is copied in (the uploaded float64 for data)
    at: tuple | None       # the in-place key: ``key`` and the large arrays' addresses, if any
    large: list[bool]      # per argument: read in place by the in-place graph


def _classify(name: str, args: tuple, data: frozenset[str], params: list[str]) -> _Call:
    batch = args[0].shape[0]
    # the stream too: a graph's buffers are written on one stream only, so a copy out still
    # pending on another never races the next replay
    key: list[Any] = [name, BACKEND.device(), BACKEND.stream()]
    roles, values = [], []
    for pname, a in zip(params, args):
        if _on_device(a):
            roles.append("copied")
            key.append(("copied", a.shape, a.dtype.str))
            values.append(a)
        elif pname in data:
            u = _uniform(a, batch)
            if u is None:
                raise NotReplayable("a per-row uniform the call refuses")
            roles.append("uploaded")
            key.append(("uploaded", batch))
            values.append(u)
        else:
            roles.append("host")
            key.append(_host_key(a))
            values.append(a)
    large = [r == "copied" and v.nbytes >= IN_PLACE_BYTES for r, v in zip(roles, values)]
    places = tuple((i, _address(v), v.strides) for i, v in enumerate(values) if large[i])
    return _Call(tuple(key), roles, values, (*key, ("at", places)) if places else None, large)


def _address(a: Any) -> int:
    data = getattr(a, "data", None)
    ptr = getattr(data, "ptr", None)  # CuPy; a NumPy stand-in answers through its interface
    return int(ptr) if ptr is not None else int(a.__array_interface__["data"][0])


def _device_like(ref: Any, shape: tuple, dtype: Any) -> Any:
    from gpu_impl._array import get_xp
    a = get_xp(ref).empty(shape, dtype)
    return a if type(a) is type(ref) else a.view(type(ref))


def _copy_in(call: _Call, statics: list[Any]) -> None:
    for role, static, v in zip(call.roles, statics, call.values):
        if static is None:  # a host value of the key, or an array read in place
            continue
        if role == "copied":
            static[...] = v
        elif role == "uploaded":
            if hasattr(static, "set"):
                static.set(v)
            else:
                static[...] = v


def _outputs(out: Any) -> tuple[Any, ...]:
    outs = out if isinstance(out, tuple) else (out,)
    if not all(_on_device(o) for o in outs):
        raise NotReplayable("an output that is not a device array")
    return outs


def _copy_out(out: Any) -> Any:
    return tuple(o.copy() for o in out) if isinstance(out, tuple) else out.copy()


def _same(a: Any, b: Any) -> bool:
    from gpu_impl._array import get_xp
    pairs = list(zip(_outputs(a), _outputs(b)))
    return all(x.shape == y.shape and x.dtype == y.dtype and bool(get_xp(x).array_equal(x, y)) for x, y in pairs)


def _capture(fn: Callable[..., Any], call: _Call, args: tuple, result: Any, in_place: bool) -> Entry:
    statics = [_device_like(args[0], v.shape, v.dtype) if r in ("copied", "uploaded") and not (in_place and big)
               else None for r, v, big in zip(call.roles, call.values, call.large)]
    _copy_in(call, statics)
    call_args = [s if s is not None else a for s, a in zip(statics, args)]

    keep: list[Any] = []

    def body() -> tuple[Any, Any]:
        token = _KEEP.set(keep)
        try:
            with _deferred.collected() as checks:
                out = fn.__wrapped__(*call_args)
                _outputs(out)
                return out, checks.any_flag()
        finally:
            _KEEP.reset(token)
    graph, (out, flag), owner = BACKEND.capture(body)
    entry = Entry(graph, statics, out, flag, owner, keep)
    BACKEND.launch(graph)  # once on the inputs that captured it: the same result or never again
    if (flag is not None and any(_deferred.read_flags([flag]))) or not _same(out, result):
        raise NotReplayable("the graph's result differs from the eager call's")
    return entry


def _replay(fn: Callable[..., Any], entry: Entry, call: _Call, args: tuple, in_place: bool = False) -> Any:
    _copy_in(call, entry.statics)
    BACKEND.launch(entry.graph)
    if entry.flag is not None and any(_deferred.read_flags([entry.flag])):
        STATS.eager += 1
        return fn(*args)  # a check failed: the eager call raises its error
    STATS.replays += 1
    STATS.in_place += in_place
    return _copy_out(entry.out)


def _consider(fn: Callable[..., Any], key: tuple, call: _Call, args: tuple, result: Any, in_place: bool) -> None:
    """A sighting of ``key``, whose result was ``result``: captured from the second on."""
    if key in _REFUSED or not _seen_before(key):
        return
    try:
        entry = _capture(fn, call, args, result, in_place)
    except Exception as e:  # the result stands; this key stays eager
        _refuse(key, e.args[0] if isinstance(e, NotReplayable) else type(e).__name__)
        return
    STATS.captures += 1
    _GRAPHS[key] = entry
    while len(_GRAPHS) > MAX_GRAPHS:
        _GRAPHS.popitem(last=False)


def _refuse(key: tuple | None, reason: str) -> None:
    STATS.refused[reason] = STATS.refused.get(reason, 0) + 1
    if key is not None:
        _REFUSED[key] = reason
        while len(_REFUSED) > MAX_SEEN:
            _REFUSED.popitem(last=False)


def replayed(data: tuple[str, ...] = ()) -> Callable[[F], F]:
    """Replay ``fn`` (a ``_deferred.validated`` public call whose first argument is the logits)
    from a CUDA graph on CuPy rows; ``data`` names its per-row uniforms (drawn anew each call)."""
    def wrap(fn: F) -> F:
        sig = inspect.signature(fn)
        params = list(sig.parameters)
        wanted = frozenset(data)

        @functools.wraps(fn)
        def call(*args: Any, **kwargs: Any) -> Any:
            if (kwargs or not args or _deferred.nested() or not _rows_on_device(args[0]) or not enabled()
                    or BACKEND.capturing()):
                return fn(*args, **kwargs)  # keywords, a call inside another, rows the kernels do not take
            try:
                args = tuple(sig.bind(*args).args)
                c = _classify(fn.__qualname__, args, wanted, params)
            except (TypeError, NotReplayable):
                return fn(*args)
            with _LOCK:
                entry = _GRAPHS.get(c.at) if c.at is not None else None
                if entry is not None:
                    _GRAPHS.move_to_end(c.at)
                    return _replay(fn, entry, c, args, in_place=True)
                entry = _GRAPHS.get(c.key)
                if entry is not None:
                    _GRAPHS.move_to_end(c.key)
                    result = _replay(fn, entry, c, args)
                    if c.at is not None:
                        _consider(fn, c.at, c, args, result, in_place=True)
                    return result
            result = fn(*args)  # raises for a bad call: nothing is captured
            with _LOCK:
                STATS.eager += 1
                _consider(fn, c.key, c, args, result, in_place=False)
            return result
        return call  # type: ignore[return-value]
    return wrap


def _seen_before(key: tuple) -> bool:
    """Record a sighting of ``key``; True from the second on (then it is captured)."""
    n = _SEEN.pop(key, 0) + 1
    if n >= 2:
        return True
    _SEEN[key] = n
    while len(_SEEN) > MAX_SEEN:
        _SEEN.popitem(last=False)
    return False


def _rows_on_device(x: Any) -> bool:
    """CuPy logits of a shape the kernels take (the only calls worth a graph)."""
    from gpu_impl._array import get_xp, on_device
    return _on_device(x) and getattr(x, "ndim", 0) == 2 and on_device(get_xp(x), x)
