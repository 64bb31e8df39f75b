"""MLX's real sampler (mlx-lm's ``sample_utils`` on MLX's CPU build), driven on chosen rows.

``make_sampler`` returns a closure that runs its filter chain and then calls the module-level
``categorical_sampling``; ``chain`` swaps that one name for a recorder for the duration of a call,
so the row the real chain hands to the draw (its survivors, as logprobs) is read back without
re-implementing the chain. ``draws`` runs the unpatched sampler on N copies of the row (one
``mx.random.categorical`` per copy, seeded). Penalties go through ``make_logits_processors`` and
the log-softmax ``generate_step`` applies before the sampler, on the history as MLX's ``tokens``.
"""
from __future__ import annotations

import contextlib
import importlib.metadata
from typing import Iterator

import numpy as np

from oracle.engines import Settings

PINNED = {"mlx": "0.32.4", "mlx-lm": "0.32.2"}
DTYPES = ("float32", "float16", "bfloat16")


def available() -> str | None:
    """None when the pinned MLX is importable, else why the MLX peer tests skip."""
    try:
        import mlx.core  # noqa: F401
        from mlx_lm import sample_utils  # noqa: F401
    except Exception as exc:  # an ImportError, or a CPU without the instructions the wheel needs
        return (f"MLX is not importable ({type(exc).__name__}: {exc}); install the pinned peers: "
                "pip install -e '.[peers-engines]'")
    got = versions()
    if got != PINNED:
        return f"MLX peer pinned at {PINNED}, installed {got}: the variant is derived from the pinned release"
    return None


def versions() -> dict[str, str]:
    out = {}
    for name in PINNED:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "absent"
    return out


def _modules():
    import mlx.core as mx
    from mlx_lm import sample_utils

    return mx, sample_utils


def _mx_dtype(dtype: str):
    mx, _ = _modules()
    return {"float32": mx.float32, "float16": mx.float16, "bfloat16": mx.bfloat16}[dtype]


def logprobs(logits: np.ndarray, s: Settings, dtype: str = "float32"):
    """The row ``generate_step`` hands to the sampler: the processors on the logits ([1, V] in
    ``dtype``) with the history as tokens, then ``logits - logsumexp(logits)``."""
    mx, su = _modules()
    x = mx.array(np.asarray(logits, dtype=np.float32)[None, :]).astype(_mx_dtype(dtype))
    procs = su.make_logits_processors(
        repetition_penalty=s.repetition_penalty if s.repetition_penalty != 1.0 else None,
        repetition_context_size=s.repeat_last_n,
        presence_penalty=s.presence_penalty or None, presence_context_size=s.repeat_last_n,
        frequency_penalty=s.frequency_penalty or None, frequency_context_size=s.repeat_last_n)
    if procs and s.history:
        tokens = mx.array(np.asarray(s.history, dtype=np.int32))
        for proc in procs:
            x = proc(tokens, x)
    return x - mx.logsumexp(x, keepdims=True)


def make_sampler(s: Settings, xtc: tuple[float, float] | None = None, special: tuple[int, ...] = ()):
    _, su = _modules()
    p, t = xtc if xtc is not None else (0.0, 0.1)
    return su.make_sampler(temp=float(s.temperature), top_p=float(s.top_p) if s.top_p < 1.0 else 0.0,
                           min_p=float(s.min_p), min_tokens_to_keep=int(s.min_tokens_to_keep), top_k=int(s.top_k),
                           xtc_probability=p, xtc_threshold=t, xtc_special_tokens=list(special))


@contextlib.contextmanager
def _recorded() -> Iterator[list]:
    """``categorical_sampling`` replaced by a recorder of (row, temperature) for the block."""
    mx, su = _modules()
    seen: list = []
    real = su.categorical_sampling

    def record(row, temp):
        seen.append((np.array(row.astype(mx.float32)), float(temp)))
        return mx.zeros(row.shape[:-1], dtype=mx.uint32)

    su.categorical_sampling = record
    try:
        yield seen
    finally:
        su.categorical_sampling = real


def chain(logits: np.ndarray, s: Settings, dtype: str = "float32", xtc: tuple[float, float] | None = None,
          special: tuple[int, ...] = ()) -> np.ndarray:
    """The real chain's survivors as MLX's logprobs, float64 (-inf = removed), before the
    temperature; ``ValueError`` where MLX refuses the settings. Temperature 0 (greedy) runs no
    filter: the penalised logprobs come back whole."""
    lp = logprobs(logits, s, dtype)
    if float(s.temperature) == 0.0:
        return np.array(lp.astype(_modules()[0].float32), dtype=np.float64)[0]
    with _recorded() as seen:
        make_sampler(s, xtc, special)(lp)
    (row, _), = seen
    return row.astype(np.float64)[0]


def draws(logits: np.ndarray, s: Settings, n: int, seed: int, dtype: str = "float32") -> np.ndarray:
    """n tokens from the real sampler (filters and ``categorical_sampling``) on n copies of the
    row, after ``mx.random.seed(seed)``."""
    mx, _ = _modules()
    lp = logprobs(logits, s, dtype)
    mx.random.seed(int(seed))
    out = make_sampler(s)(mx.broadcast_to(lp, (int(n), lp.shape[-1])))
    return np.array(out, dtype=np.int64).ravel()
