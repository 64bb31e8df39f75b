"""Shared by the device tests and benchmarks: the skip marker, row families and shapes, and the
``case`` grid of the kernel cases (kernel_agreement.py, kernel_paths.py)."""
from __future__ import annotations

import inspect
import itertools
from types import ModuleType
from typing import Any, Callable

import numpy as np
import pytest

from properties.backends import cupy_device_reason, cupy_or_none
from properties.samplers.strategies import make_logits

REASON = cupy_device_reason()
needs_device = pytest.mark.skipif(REASON is not None, reason=f"needs a CUDA device: {REASON}")
cp = cupy_or_none() if REASON is None else None

# (B, V): odd widths take the scalar-load path, multiples of 4 the float4 path; 262,144 is the
# largest vocabulary the suite draws; 64 rows is the batched case the benchmarks time
SHAPES = ((1, 1), (1, 7), (3, 1000), (2, 4099), (5, 32000), (2, 262144), (64, 8192))
FAMILIES = ("peaked", "flat", "zipf", "plateaus", "near_ties", "neg_inf", "one_finite", "huge", "past_fp16")


def rows(family: str, shape: tuple[int, int], seed: int = 0, dtype: str = "float32") -> np.ndarray:
    """[B, V] logits of one family (float32 unless dtype says otherwise), one seed per row."""
    B, V = shape
    return np.stack([make_logits(family, V, 1000 * seed + b, dtype) for b in range(B)])


def normal_rows(B: int, V: int, seed: int = 0, scale: float = 3.0) -> np.ndarray:
    """The benchmark workload: N(0, scale^2) logits, float32."""
    return (np.random.default_rng(seed).standard_normal((B, V)) * scale).astype(np.float32)


def per_row(values: list, B: int, dtype=np.float64) -> np.ndarray:
    """``values`` cycled over B rows (so every row of a batch gets a different parameter)."""
    return np.asarray([values[b % len(values)] for b in range(B)], dtype=dtype)


def case(**axis: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Marks a kernel case, a function of the array module ``cp`` (then its grid's keywords, and
    ``monkeypatch`` where it asks), and adds ``axis`` (name=values) to its grid."""
    def mark(fn: Callable[..., Any]) -> Callable[..., Any]:
        fn.grid = {**axis, **getattr(fn, "grid", {})}  # type: ignore[attr-defined]
        return fn
    return mark


def case_params(*modules: ModuleType, max_elements: int | None = None) -> list[Any]:
    """``pytest.param(fn, kwargs)`` for every point of every case's grid in ``modules``, in
    definition order; ``max_elements`` leaves out shapes with more B x V."""
    out = []
    for module in modules:
        for fn in vars(module).values():
            if not (inspect.isfunction(fn) and hasattr(fn, "grid")):
                continue
            for values in itertools.product(*fn.grid.values()):
                kw = dict(zip(fn.grid, values))
                B, V = kw.get("shape", (1, 1))
                if max_elements is None or B * V <= max_elements:
                    out.append(pytest.param(fn, kw, id=f"{fn.__name__}[{'-'.join(str(v) for v in values)}]"))
    return out


def run_case(fn: Callable[..., Any], cp: Any, kw: dict, monkeypatch: pytest.MonkeyPatch) -> None:
    if "monkeypatch" in inspect.signature(fn).parameters:
        kw = {**kw, "monkeypatch": monkeypatch}
    fn(cp, **kw)
