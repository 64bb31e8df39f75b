"""Validation read once per public call.

Every check on array *data* (NaN rows, rows without candidates, history ids, parameters handed
over as device arrays) is registered as a flag plus the function that builds its error message;
the flags of one public call are read together when it ends (one small device -> host copy on
CuPy), and the first failing check, in the order the checks were made, raises its ``ValueError``.
Why: on CuPy every ``bool(flag)`` is a copy that waits for all queued kernels; a validated
chain + dist made nine of them and took 3,019 us at 64 x 262,144 on an H200, against 217 us for
its kernels replayed from a CUDA graph (docs/gpu.md).

Checks on host values (shapes, dtypes, parameters given as scalars or NumPy arrays) still raise
at once; a raise, or any exception, inside a public call first reads the flags registered before
it, so the error is the one the eager checks would have raised. Computation after a failing
flag runs on invalid data until the call ends: its result is discarded, and code that indexes
memory with validated values sanitises them first.

A public function nested in another (the chain calls penalties) joins its caller's checks, so
the outer call still reads once. Outside any public call, ``check`` reads at once.
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
from typing import Any, Callable, TypeVar

import numpy as np

Message = Callable[[], str]
F = TypeVar("F", bound=Callable[..., Any])


def on_host(a: Any) -> bool:
    """A value the host holds (scalar, list, NumPy array): deciding on it costs no device read."""
    return not hasattr(a, "get")


def read_flags(flags: list[Any]) -> list[bool]:
    """The one host read of a call's flags: host booleans as they are, device ones stacked and
    copied back together. Every deferred check goes through here (tests count the calls)."""
    device = [i for i, f in enumerate(flags) if not on_host(f)]
    values = [bool(f) if i not in device else False for i, f in enumerate(flags)]
    if len(device) == 1:  # one flag: copied back as it is
        values[device[0]] = bool(flags[device[0]].get())
    elif device:
        from gpu_impl._array import get_xp
        got = get_xp(flags[device[0]]).stack([flags[i].reshape(()) for i in device]).get()
        for i, v in zip(device, got):
            values[i] = bool(v)
    return values


class Checks:
    """The pending checks of one public call, in the order they were made."""

    def __init__(self) -> None:
        self._pending: list[tuple[Any, Message]] = []

    def add(self, flag: Any, message: Message) -> None:
        self._pending.append((flag, message))

    def first_failure(self) -> str | None:
        """The message of the first failing check (one read), or None; clears the checks."""
        pending, self._pending = self._pending, []
        if not pending:
            return None
        for (_, message), failed in zip(pending, read_flags([f for f, _ in pending])):
            if failed:
                return message()
        return None

    def any_flag(self) -> Any:
        """One 0-d flag, true where any pending check fails, computed where the flags are (on the
        device: no read, so a graph captures it), or None when there is none; clears the checks."""
        pending, self._pending = self._pending, []
        host = [bool(f) for f, _ in pending if on_host(f)]
        device = [f for f, _ in pending if not on_host(f)]
        if not device or any(host):
            return np.asarray(any(host)) if pending else None
        from gpu_impl._array import get_xp
        return get_xp(device[0]).stack([f.reshape(()).astype(bool) for f in device]).any()


_ACTIVE: contextvars.ContextVar[Checks | None] = contextvars.ContextVar("gpu_impl_checks", default=None)


def check(bad: Any, message: Message) -> None:
    """Fail with ``message()`` if any element of ``bad`` (a boolean array on the data's backend)
    is true: deferred to the end of the public call, or read now outside one."""
    flag = bad.any() if getattr(bad, "ndim", 0) else bad
    checks = _ACTIVE.get()
    if checks is not None:
        checks.add(flag, message)
    elif read_flags([flag])[0]:
        raise ValueError(message())


def nested() -> bool:
    """Inside a public call (whose checks this call joins)."""
    return _ACTIVE.get() is not None


@contextlib.contextmanager
def collected() -> Any:
    """Collect the checks made inside (nested public calls join) without reading them: for a
    caller that reads them its own way (a captured graph, ``gpu_impl._replay``)."""
    checks = Checks()
    token = _ACTIVE.set(checks)
    try:
        yield checks
    finally:
        _ACTIVE.reset(token)


def validated(fn: F) -> F:
    """Make ``fn`` a public call: its deferred checks are read once, when it returns or raises."""
    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if _ACTIVE.get() is not None:
            return fn(*args, **kwargs)
        checks = Checks()
        token = _ACTIVE.set(checks)
        try:
            out = fn(*args, **kwargs)
        except Exception:
            _ACTIVE.reset(token)
            earlier = checks.first_failure()
            if earlier is not None:  # the eager checks would have stopped there
                raise ValueError(earlier) from None
            raise
        _ACTIVE.reset(token)
        failure = checks.first_failure()
        if failure is not None:
            raise ValueError(failure)
        return out
    return call  # type: ignore[return-value]
