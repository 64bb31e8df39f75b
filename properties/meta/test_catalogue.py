"""The sampler catalogue judged: one record per sampler, and no name that is no record.

Every per-sampler role is a typed facet of its record (``properties/samplers/record.py``); the
tables that remain elsewhere are derived from the records. This module

- prints, per record, the roles it takes part in and the ones it lacks (the figure a contributor
  reads before adding a sampler), and checks the facets that must come together;
- reads the source of ``properties/`` (AST, nothing run) for string constants used as sampler
  names - lookups in the catalogue, ``record_named``, chain steps ``("top_k", {...})`` - and fails
  on any that names no record; it lists the dict literals still keyed by sampler names;
- checks every derived table, the findings' witness chains, the order matrix's pair notes and the
  sampler zoo's replaced functions against the records;
- checks the engine lists against the spec's one list (``oracle.engines.ENGINES``);
- where llama.cpp is importable, checks each record's llama.cpp name against the oracle sampler it
  builds, and its ``backend`` flag against the real library's ``backend_apply``.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from properties.samplers.records import BY_LLAMA_NAME, RECORDS, RECORDS_BY_NAME, record_named

ROOT = Path(__file__).resolve().parents[2]
NAMES = frozenset(RECORDS_BY_NAME)
LLAMA_NAMES = frozenset(BY_LLAMA_NAME)
LOOKUPS = {"RECORDS_BY_NAME": NAMES, "BY_LLAMA_NAME": LLAMA_NAMES}


def facets(record) -> tuple[list[str], list[str]]:
    """(roles the record takes part in, roles it lacks)."""
    llama = record.llama
    roles = {
        "impl": record.has_impl, "corners": record.corner is not None, "cut corner": record.cut is not None,
        "exact boundary": record.boundary is not None, "chains": record.chain is not None,
        "default chain": record.chain is not None and record.chain.default, "order matrix": record.order is not None,
        "llama.cpp peer": llama is not None, "llama.cpp stream": llama is not None and bool(llama.stream),
        "common_sampler letter": llama is not None and bool(llama.letter),
        "llama.cpp backend": llama is not None and llama.backend,
        "backend chains": llama is not None and bool(llama.backend_chain),
        "reproducer call": llama is not None and bool(llama.call),
        "zoo mutants": bool(record.impl_name) and record.impl_name in zoo_functions(),
    }
    return [k for k, v in roles.items() if v], [k for k, v in roles.items() if not v]


def test_print_catalogue():
    """The catalogue, record by record (shown with -s; the report keeps the printed table too)."""
    for r in RECORDS:
        has, lacks = facets(r)
        print(f"{r.name:12s} {r.kind:9s} takes part in: {', '.join(has)}")
        print(f"{'':22s} lacks: {', '.join(lacks) or '-'}")
    assert len(NAMES) == len(RECORDS), "two records share a name"
    assert len(LLAMA_NAMES) == sum(r.llama is not None for r in RECORDS), "two records share a llama.cpp name"


@pytest.mark.parametrize("record", RECORDS, ids=str)
def test_facets_that_come_together(record):
    """A facet that needs another has it: an impl record has corners (else ``corners()`` would
    silently pin nothing), a letter has its settings mapping, a backend-chain place its
    parameters, a stream its representative parameters, a default-chain member a chain role."""
    assert not record.has_impl or record.corner is not None, f"{record.name}: an impl but no corner parameters"
    assert record.build is not None, f"{record.name}: no oracle factory (build)"
    llama = record.llama
    if llama is not None:
        assert bool(llama.letter) == (llama.settings is not None), f"{record.name}: letter without settings or back"
        assert bool(llama.backend_chain) == (llama.backend_params is not None), f"{record.name}: backend-chain place"
        assert llama.backend_chain in ("", "prefix", "suffix")
        assert (llama.stream != "") == (llama.stream_params is not None), f"{record.name}: stream without parameters"
        assert llama.stream in ("", "own", "fed") and (not llama.self_state or llama.stream == "own")
        assert llama.backend_chain != "prefix" or llama.backend, f"{record.name}: a graph-op prefix member without backend"


def test_unknown_names_raise():
    with pytest.raises(KeyError, match="no sampler record named 'top-k'"):
        record_named("top-k")
    from properties.samplers import order
    with pytest.raises(KeyError):
        order.build("xtc", {}, 8)  # a record, but no member of the order matrix
    with pytest.raises(KeyError):
        order.build("top_a", {}, 8)


# ---- names in the source ----------------------------------------------------------------------

def _sources() -> list[Path]:
    return sorted(p for p in (ROOT / "properties").rglob("*.py") if p.name != "test_catalogue.py")


def _aliases(tree: ast.AST) -> dict[str, frozenset]:
    """Local names bound to a catalogue lookup (``r = RECORDS_BY_NAME``, ``p, r = x, RECORDS_BY_NAME``)."""
    out = dict(LOOKUPS)
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            pairs = []
            for t in node.targets:
                if isinstance(t, ast.Tuple) and isinstance(node.value, ast.Tuple):
                    pairs += zip(t.elts, node.value.elts)
                else:
                    pairs.append((t, node.value))
            for t, v in pairs:
                if isinstance(t, ast.Name) and isinstance(v, ast.Name) and v.id in LOOKUPS:
                    out[t.id] = LOOKUPS[v.id]
    return out


def _str(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def sampler_name_uses(path: Path) -> list[tuple[int, str, frozenset, str]]:
    """(line, the string, the names it must be one of, where) for every string used as a sampler
    name in ``path``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    aliases, out = _aliases(tree), []
    room = path.relative_to(ROOT).parts[1]
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            if _str(node.slice) is not None:
                out.append((node.lineno, _str(node.slice), aliases[node.value.id], "catalogue lookup"))
        elif isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) == "record_named":
            if node.args and _str(node.args[0]) is not None:
                out.append((node.lineno, _str(node.args[0]), NAMES, "record_named"))
        elif (room in ("samplers", "peers") and isinstance(node, ast.Tuple) and len(node.elts) == 2
              and _str(node.elts[0]) is not None and isinstance(node.elts[1], ast.Dict)):
            out.append((node.lineno, _str(node.elts[0]), NAMES, "chain step (name, parameters)"))
        elif isinstance(node, ast.Dict) and node.keys and all(_str(k) is not None for k in node.keys):
            keys = [_str(k) for k in node.keys]
            if sum(k in NAMES for k in keys) >= max(2, len(keys) / 2):  # a table keyed by sampler names
                out += [(node.lineno, k, NAMES, "key of a table keyed by sampler names") for k in keys]
    return out


def test_every_sampler_name_in_the_source_names_a_record():
    """Catalogue lookups, ``record_named`` calls and chain steps name records. (Keys of dict
    literals are listed by the next test, not judged: a label such as "temp0" is a test's own.)"""
    bad = [f"{p.relative_to(ROOT)}:{line}: {name!r} ({where})"
           for p in _sources() for line, name, allowed, where in sampler_name_uses(p)
           if name not in allowed and not where.startswith("key of")]
    assert not bad, "strings used as sampler names that name no record:\n" + "\n".join(bad)


def test_name_keyed_tables_left():
    """The dict literals still keyed by sampler names, listed (a figure, not a failure): each is a
    test's own data, not a role of the sampler."""
    tables = sorted({f"{p.relative_to(ROOT)}:{line}" for p in _sources()
                     for line, _, _, where in sampler_name_uses(p) if where.startswith("key of")})
    print(f"{len(tables)} dict literals keyed by sampler names:", *tables, sep="\n  ")


def test_derived_tables_name_records():
    from properties.peers.llama_cpp import backend_chains, chains_differential, witness
    from properties.samplers import boundaries, chains, order

    tables = {"chains.CHAIN_SAMPLERS": chains.CHAIN_SAMPLERS, "chains.DEFAULT_CHAIN": chains.DEFAULT_CHAIN,
              "order.SAMPLERS": order.SAMPLERS, "boundaries.BOUNDARY": tuple(boundaries.BOUNDARY),
              "chains_differential.MEMBERS": chains_differential.MEMBERS,
              "chains_differential.SELECTORS": chains_differential.SELECTORS,
              "chains_differential.STATEFUL": chains_differential.STATEFUL,
              "backend_chains.BACKEND_MEMBERS": backend_chains.BACKEND_MEMBERS,
              "backend_chains.SUFFIX_MEMBERS": backend_chains.SUFFIX_MEMBERS,
              "witness.SELECTORS": witness.SELECTORS,
              "order pair notes": tuple(n for pair in (*order.COMMUTE, *order.WHY) for n in pair)}
    bad = {k: sorted(set(v) - NAMES) for k, v in tables.items() if set(v) - NAMES}
    assert not bad, f"derived tables naming no record: {bad}"
    assert set(n for pair in (*order.COMMUTE, *order.WHY) for n in pair) <= set(order.SAMPLERS)


def test_witness_chains_name_records_with_a_reproducer_call():
    """Every finding witness's chain names records that llama.cpp knows and a reproducer can call."""
    from properties.peers.llama_cpp.findings import FINDINGS

    steps = [(f.id, name) for f in FINDINGS if f.call is not None for name, _ in f.call.steps]
    bad = [(fid, name) for fid, name in steps
           if name not in NAMES or RECORDS_BY_NAME[name].llama is None or not RECORDS_BY_NAME[name].llama.call]
    assert not bad, f"witness steps without a record that has a llama.cpp reproducer call: {bad}"


def zoo_functions() -> dict[str, int]:
    """gpu_impl function -> how many sampler mutants replace it (read from the zoo's source)."""
    tree = ast.parse((ROOT / "properties/zoo/samplers/__init__.py").read_text())
    out: dict[str, int] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "_mutant" and len(node.args) >= 3:
            fn = _str(node.args[2])
            if fn is not None:
                out[fn] = out.get(fn, 0) + 1
    return out


def test_zoo_mutants_replace_functions_of_records():
    """A sampler mutant replaces a record's impl function, or a gpu_impl helper the records'
    functions share (softmax): never a name nothing calls."""
    import gpu_impl

    impl_names = {r.impl_name for r in RECORDS if r.impl_name}
    funcs = zoo_functions()
    assert funcs, "no sampler mutant found in the zoo's source"
    helpers = sorted(set(funcs) - impl_names)
    print("mutants per record function:", {f: n for f, n in funcs.items() if f in impl_names}, "helpers:", helpers)
    assert all(callable(getattr(gpu_impl, f, None)) for f in helpers), f"mutants replace unknown functions: {helpers}"


# ---- finding ids: every one a judge cites is in the ledger ------------------------------------

_CITING_CALLS = {"FindingDomain", "NaNEntropyDomain", "BackendAbort", "finding", "kind_of"}
_CITING_TABLES = {"SUBSTITUTIONS", "CHAIN_CLASSES"}


def cited_finding_ids(path: Path) -> list[tuple[int, str]]:
    """(line, id) of the finding ids ``path`` cites: raised domains and aborts, returned abort
    reasons, substitution tables, ``"id" in subs`` tests, ``Explanation("id", ...)``."""
    tree = ast.parse(path.read_text(), filename=str(path))
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", getattr(node.func, "attr", "")) in (
                _CITING_CALLS | {"Explanation"}) and node.args and _str(node.args[0]):
            out.append((node.lineno, _str(node.args[0])))
        elif isinstance(node, ast.Assign) and any(getattr(t, "id", "") in _CITING_TABLES for t in node.targets):
            out += [(node.lineno, _str(e)) for e in getattr(node.value, "elts", []) if _str(e)]
        elif isinstance(node, ast.Compare) and _str(node.left) and any(isinstance(o, ast.In) for o in node.ops) \
                and getattr(node.comparators[0], "id", "") == "subs":
            out.append((node.lineno, _str(node.left)))
        elif isinstance(node, ast.FunctionDef) and node.name == "abort_reason":
            out += [(r.lineno, _str(r.value)) for r in ast.walk(node) if isinstance(r, ast.Return) and _str(r.value)]
    return out


def test_every_cited_finding_is_in_the_ledger():
    from properties.peers.llama_cpp.findings import LEDGER

    modules = [p for p in sorted((ROOT / "properties/peers").rglob("*.py")) if not p.name.startswith("test_")]
    cited = [(p, line, fid) for p in modules for line, fid in cited_finding_ids(p)]
    assert len(cited) >= 20, f"the scan found only {len(cited)} citations: is it still looking in the right places?"
    bad = [f"{p.relative_to(ROOT)}:{line}: {fid!r}" for p, line, fid in cited if fid not in LEDGER]
    assert not bad, "finding ids cited but not in the ledger:\n" + "\n".join(bad)


# ---- engines: one list ------------------------------------------------------------------------

def test_engine_lists_are_the_spec_list():
    from oracle.engines import ENGINES
    from properties.engines.logprobs_checks import ENGINE_CHAINS
    from properties.engines.matrix import ENGINE_ORDER
    from properties.engines.records import ENGINE_NAMES

    assert tuple(ENGINE_ORDER) == tuple(ENGINES)
    assert set(ENGINE_NAMES) | {"llama.cpp"} == set(ENGINES) and "llama.cpp" not in ENGINE_NAMES
    assert set(ENGINE_CHAINS) <= set(ENGINES)


# ---- the llama.cpp facet against the real library ---------------------------------------------

LLAMA_RECORDS = [r for r in RECORDS if r.llama is not None]


@pytest.mark.parametrize("record", LLAMA_RECORDS, ids=str)
@settings(max_examples=10, deadline=None)
@given(data=st.data())
def test_llama_name_is_the_oracle_samplers_name(record, data):
    """``llama.name`` is the ``.name`` of the sampler ``build`` makes ("?name" when disabled), for
    any constructor parameters the facet draws."""
    vocab = data.draw(st.sampled_from([1, 2, 16, 300]), label="vocab")
    params = data.draw(record.llama.params(vocab), label="params")
    assert record.build(params, vocab).name in (record.llama.name, "?" + record.llama.name)


@pytest.mark.peer
@pytest.mark.parametrize("record", LLAMA_RECORDS, ids=str)
def test_backend_flag_is_the_librarys(record):
    """``llama.backend`` is what llama.cpp says: its sampler has a ggml-graph ``backend_apply``."""
    from properties.peers.llama_cpp import adapter as peer

    reason = peer.available()
    if reason is not None:
        pytest.skip(reason)
    from properties.peers.llama_cpp.backend_sampling import backend_capable

    params = record.llama.stream_params or _first(record.llama.params(16))
    try:
        smp = record.llama.peer(params, 16)
    except peer.Unavailable as exc:
        pytest.skip(str(exc))
    with smp:
        assert backend_capable(smp) == record.llama.backend


def _first(strategy: st.SearchStrategy) -> dict:
    """The strategy's simplest value (hypothesis' minimal example, found deterministically)."""
    from hypothesis import find

    return find(strategy, lambda _: True, settings=settings(database=None, max_examples=1))
