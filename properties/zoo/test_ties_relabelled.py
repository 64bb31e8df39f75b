"""Every conforming member's answers relabelled inside tie classes get the verdicts its own
answers get (``properties.meta.tie_relabelling``; gpu_impl's own in
``properties/meta/test_meta_ties.py``): the tie-relabelling property, member by member, on the
records whose function the member replaces."""
from __future__ import annotations

import importlib

import pytest

from properties.meta.tie_relabelling import TIED, check_noop_relabelled, check_relabelling
from properties.samplers.records import record_named
from properties.zoo.conforming import MEMBERS


def _member(name: str):
    return importlib.import_module(f"properties.zoo.conforming.{name}")


POINTS = [(r, m) for r in TIED for m in MEMBERS if r in _member(m).REPLACED]


@pytest.mark.parametrize("record, member", POINTS)
def test_member_relabelled_inside_ties_keeps_its_verdicts(record, member):
    check_relabelling(_member(member), record)
    if record_named(record).noop:
        check_noop_relabelled(_member(member), record)


def test_every_member_with_a_tied_record_is_visited():
    assert {"hf_warpers", "vllm_sampler", "torch_cpu", "llama_cpp_cpu"} <= {m for _, m in POINTS}
