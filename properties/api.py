"""The judge's public API: the only names the product CLI and report (``reports/``) may take
from ``properties``. Everything else in ``properties`` is the judge's own business and may
change shape without the CLI noticing; ``properties/meta/test_import_rules.py`` holds the wall.

Each function imports what it needs when called, so ``logitcheck --help`` and the report's
renderer do not pay for hypothesis, llama-cpp-python or CuPy.
"""
from __future__ import annotations

from typing import Any, Iterable, Sequence


def backends() -> tuple[str, ...]:
    """The array backends ``--backend`` takes (numpy, cupy, emulated)."""
    from properties.backends import BACKENDS

    return BACKENDS


def findings() -> Sequence[Any]:
    """Every llama.cpp finding in the ledger (id, kind, title, witness, expected, observed)."""
    from properties.peers.llama_cpp.findings import FINDINGS

    return FINDINGS


def reproducer(finding_id: str) -> str | None:
    """The stand-alone reproducer script of one finding, or None where it needs none."""
    from properties.peers.llama_cpp import reproducers

    return reproducers.script(finding_id)


def bin_key(value: float) -> str:
    """The histogram bin the results writer files a measured value under."""
    from properties.recording import bin_key as key

    return key(value)


def quantile(bins: dict[str, int], q: float) -> float | None:
    """The q-quantile of a binned histogram written by the results writer."""
    from properties.recording import quantile as qt

    return qt(bins, q)


def cupy_device_reason() -> str | None:
    """Why the CuPy backend cannot run here (None: it can)."""
    from properties.backends import cupy_device_reason as reason

    return reason()


def cupy_or_none() -> Any:
    """The ``cupy`` module where a device can run it, else None."""
    from properties.backends import cupy_or_none as get

    return get()


def envelope(model: Any, tokens: Iterable[int], engine: str, **kwargs: Any) -> Any:
    """The forward-pass error model of ``engine`` on ``model`` (properties/models/error_model.py)."""
    from properties.models.error_model import envelope as env

    return env(model, tokens, engine, **kwargs)


def layers_verdict(rows: Sequence[Any], engine: str, env: Any, model: Any) -> Any:
    """Drift or bug: the verdict of ``oracle.models.layers.compare`` rows judged under ``engine``'s
    error model ``env`` (an ``envelope``), with each layer's norm weights of ``model`` and the gain
    the envelope measures through them (properties/models/verdict.py). ``.lines()`` prints it."""
    from properties.models.verdict import judge, model_norms

    return judge(rows, engine, model_norms(model), env.tensors)


def matched_reference(model: Any, tokens: Iterable[int], storage: str, engine: str | None = None) -> Any:
    """The oracle's pass with ``storage`` rounding at every tensor (but the outputs ``engine``'s
    fused ops never store) and its residual bounds (properties/models/matched.py)."""
    from properties.models.error_model import ENGINES, compute_model
    from properties.models.matched import matched

    if engine is None:
        return matched(model, list(tokens), storage)
    return matched(model, list(tokens), storage, fused=ENGINES[engine].fused, compute=compute_model(ENGINES[engine]))


def layers_verdict_both(env: Any, engine: str, model: Any, tensors: Any, matched_ref: Any, local: Any = None) -> Any:
    """``layers_verdict`` that also reads ``matched_ref`` where ``engine`` stores below float32 and
    ``local`` (``local_replay``) where given (properties/models/verdict.py ``verdict_of``); both
    None: the float64 bound alone."""
    from properties.models.verdict import verdict_of

    return verdict_of(env, engine, model, tensors, matched_ref, local)


def local_replay(model: Any, tokens: Iterable[int], tensors: Any, engine: str) -> Any:
    """Each of ``tensors`` (graph names) against the oracle's recomputation of it from the run's own
    dumped inputs, under the one-op and local bounds of ``engine`` (properties/models/replay.py)."""
    from properties.models.replay import replay

    return replay(model, list(tokens), tensors, engine)


def error_models() -> tuple[str, ...]:
    """The engines whose forward-pass error model the judge declares (``--error-model`` choices)."""
    from properties.models.error_model import ENGINES

    return tuple(ENGINES)


def engine_storage(engine: str) -> str:
    """The storage dtype of an error model's engine (float32, float16, bfloat16)."""
    from properties.models.error_model import ENGINES

    return ENGINES[engine].storage


def explain_precision(references: Any, tensors: Any) -> Any:
    """Which storage precision's matched reference explains ``tensors`` (``.line()`` prints it)."""
    from properties.models.matched import explain

    return explain(references, tensors)


def signature_table() -> Sequence[Any]:
    """The judged API: one row per function (its parameters, which properties call it)."""
    from properties.protocol.signatures import table

    return table()


DEVICE_BENCH = "properties.gpu.device_bench"
"""The module ``logitcheck device-check`` runs in a subprocess for the GPU benchmarks."""


def area_of(nodeid: str) -> str:
    """The area a test of the suite counts under in a judge run (samplers, ops, quants, chains,
    engines, speculative, ...): the progress lines and the end-of-run summary use the same."""
    from properties.plugin import area_of as area

    return area(nodeid)


def shadowed_packages() -> list[str]:
    """Why logitcheck's top-level packages are not its own here (another module shadows one)."""
    from properties.packages import shadowed

    return shadowed()


def judged_line(nodeid: str, cases: int, unsupported: int) -> str:
    """"NODEID: judged on N of M cases (U answered unsupported)", as the terminal summary says it."""
    from properties.case_coverage import judged_line as line

    return line(nodeid, cases, unsupported)
