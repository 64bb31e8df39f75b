"""gpu_impl's samplers as the pyharness serves them by default, in process, each dropping the last
element of its result: the in-process twin of ``pyharness --fault wrong_shape --on all``, so the
cost of a failing implementation (hypothesis's shrinking included) can be told apart from the
cost of the protocol (``bench_faults.py``, docs/protocol.md)."""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

import gpu_impl

__all__ = ["softmax", "greedy", "dist", "temp", "top_k", "top_p", "min_p"]


def _short(fn: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        return np.asarray(fn(*args, **kwargs)).reshape(-1)[:-1]
    call.__name__ = fn.__name__
    return call


globals().update({name: _short(getattr(gpu_impl, name)) for name in __all__})
