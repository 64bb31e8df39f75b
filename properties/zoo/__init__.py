"""The bug zoos: for each domain, known engine bugs as mutants of gpu_impl (``samplers``, ``ops``,
``quants``), and one runner (``runner``) that hunts each with the domain's own property bodies and
counts the examples to the first kill. ``domain("ops")`` is that domain's ``runner.Domain``."""
from __future__ import annotations

import importlib

DOMAINS = ("samplers", "ops", "quants")


def domain(name: str):
    """The ``runner.Domain`` of ``name`` (one of DOMAINS): its module, properties and mutants."""
    if name not in DOMAINS:
        raise ValueError(f"unknown zoo domain {name!r}; known: {', '.join(DOMAINS)}")
    return importlib.import_module(f"properties.zoo.{name}").DOMAIN
