"""Assemble a conforming engine: a module namespace with gpu_impl's (or gpu_impl.ops') full API,
some functions replaced by the engine's own."""
from __future__ import annotations

import importlib
from typing import Callable


def install(namespace: dict, base: str, replaced: dict[str, Callable]) -> None:
    """Fill ``namespace`` (a module's globals) with ``base``'s public API, then ``replaced``."""
    module = importlib.import_module(base)
    api = list(module.__all__)
    unknown = sorted(set(replaced) - set(api))
    if unknown:
        raise ValueError(f"{base} has no {unknown} to replace")
    namespace.update({name: getattr(module, name) for name in api})
    namespace.update(replaced)
    namespace["__all__"] = api
    namespace["REPLACED"] = tuple(sorted(replaced))
