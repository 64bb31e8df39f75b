"""An implementation whose every function raises (gpu_impl's API, and its ops, quants and
engines modules): no test that judges it may pass."""
from __future__ import annotations

import importlib
import types


class Broken(RuntimeError):
    pass


def _raising(name: str):
    def f(*args, **kwargs):
        raise Broken(f"{name}: this implementation raises on every call")
    f.__name__ = name
    return f


def _fill(namespace: dict | types.ModuleType, base: str) -> None:
    mod = importlib.import_module(base)
    for name in mod.__all__:
        value = _raising(f"{base}.{name}")
        if isinstance(namespace, dict):
            namespace[name] = value
        else:
            setattr(namespace, name, value)


_fill(globals(), "gpu_impl")
ops = types.ModuleType(f"{__name__}.ops")
quants = types.ModuleType(f"{__name__}.quants")
engines = types.ModuleType(f"{__name__}.engines")
for _part, _mod in (("ops", ops), ("quants", quants), ("engines", engines)):
    _fill(_mod, f"gpu_impl.{_part}")
