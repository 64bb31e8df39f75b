"""Shared, cached runs for the whole-model properties: the fixture files, the oracle's model
objects, error envelopes, and the parity table the report draws (``model_parity``)."""
from __future__ import annotations

import functools
import logging
from pathlib import Path
from typing import Any

from fixtures import gguf_gen, goldens
from oracle.models import Model, load_model
from properties import recording
from properties.models.error_model import Envelope, envelope

logging.getLogger("gguf").setLevel(logging.WARNING)
MODELS = goldens.MODELS
TOKENS = goldens.tokens()
PARITY: dict[str, dict[str, Any]] = {}


@functools.lru_cache(maxsize=None)
def fixture_dir() -> Path:
    """The seed-0 fixtures, generated once per session into the on-demand cache."""
    root = gguf_gen.cache_dir(goldens.SEED)
    gguf_gen.ensure(root, seed=goldens.SEED, models=MODELS)
    return root


def path(arch: str, wtype: str) -> Path:
    return gguf_gen.model_path(arch, wtype, fixture_dir())


@functools.lru_cache(maxsize=None)
def model(arch: str, wtype: str) -> Model:
    return load_model(path(arch, wtype))


@functools.lru_cache(maxsize=None)
def env(arch: str, wtype: str, engine: str, chunk: int | None = None) -> Envelope:
    return envelope(model(arch, wtype), TOKENS, engine, chunk=chunk)


def note(fixture: str, section: str, values: dict[str, Any]) -> None:
    """Add to the report's parity table: {fixture: {section: values}}."""
    PARITY.setdefault(fixture, {})[section] = values
    recording.table("model_parity", PARITY)
