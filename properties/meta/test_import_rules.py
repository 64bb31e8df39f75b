"""The house's walls, read from the source (AST, nothing imported): the spec, the implementation
and the judge stay independent, and tests are run by pytest, never used as a library.

- ``oracle`` imports neither ``gpu_impl`` nor ``properties`` (the spec cannot lean on what it judges);
- ``gpu_impl`` imports neither ``oracle`` nor ``properties`` (the implementation cannot copy the answer);
- no module imports a test module (``test_*.py``): not product code (``reports``, ``fixtures``),
  not the judge's library modules, not another test; and no test module calls its own tests;
- only the zoo imports ``properties.zoo`` (the zoo judges the suite; the suite does not depend on it);
- ``fixtures`` (data: generated files and goldens) never imports the judge (``properties``);
- the product CLI and report (``reports``) take from the judge only its public API,
  ``properties.api``: the judge's insides can change shape without the CLI noticing;
- no source file (Python, and the example harnesses' C and Rust) names a machine path or an issue
  number: comments say why, not where or which ticket.

A failure names each offending import with its file and line.
"""
from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("oracle", "gpu_impl", "properties", "fixtures", "reports")
FORBIDDEN = {"oracle": ("gpu_impl", "properties"), "gpu_impl": ("oracle", "properties")}


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path, root: Path) -> list[tuple[int, str]]:
    """(line, dotted name) of every import in ``path``; ``from a import b`` yields a.b, so a
    module imported by name from its package is seen too. Relative imports are resolved."""
    tree = ast.parse(path.read_text(), filename=str(path))
    package = module_name(path, root).split(".")
    if path.name != "__init__.py":
        package = package[:-1]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[:len(package) - node.level + 1] + ([base] if base else []))
            out += [(node.lineno, base)] + [(node.lineno, f"{base}.{a.name}") for a in node.names]
    return out


def is_test_module(name: str) -> bool:
    return name.rsplit(".", 1)[-1].startswith("test_")


def within(name: str, package: str) -> bool:
    return name == package or name.startswith(package + ".")


RULES = ("no test called as a function", "no test module imported", "only the zoo imports the zoo",
         "spec and implementation independent", "fixtures never import the judge",
         "the CLI uses only the judge's public API")
PUBLIC_API = "properties.api"


def violations(root: Path) -> dict[str, list[str]]:
    """Rule name -> offending imports, as 'path:line imports name'."""
    found: dict[str, list[str]] = {rule: [] for rule in RULES}
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            mod, where = module_name(path, root), path.relative_to(root)
            for line, name in imports(path, root):
                top = name.split(".")[0]
                if top in FORBIDDEN.get(pkg, ()):
                    found["spec and implementation independent"].append(f"{where}:{line} imports {name}")
                if is_test_module(name) and (root / Path(*name.split("."))).with_suffix(".py").exists():
                    found["no test module imported"].append(f"{where}:{line} imports {name}")
                if within(name, "properties.zoo") and not within(mod, "properties.zoo"):
                    found["only the zoo imports the zoo"].append(f"{where}:{line} imports {name}")
                if pkg == "fixtures" and top == "properties":
                    found["fixtures never import the judge"].append(f"{where}:{line} imports {name}")
                if pkg == "reports" and top == "properties" and name != "properties" and not within(name, PUBLIC_API):
                    found["the CLI uses only the judge's public API"].append(f"{where}:{line} imports {name}")
            if is_test_module(mod):
                tree = ast.parse(path.read_text())
                tests = {n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")}
                for node in ast.walk(tree):
                    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in tests:
                        found["no test called as a function"].append(f"{where}:{node.lineno} calls {node.func.id}")
    return found


# spelled in pieces so that this file does not match itself
MACHINE_OR_ISSUE = re.compile("|".join(["/" + "work/", "/" + "root/", "/" + r"home/\w", r"\bissues?\s*#?\d+"]), re.I)
SOURCE_SUFFIXES = (".py", ".c", ".h", ".rs")


def machine_paths_and_issue_numbers(root: Path, folders: tuple[str, ...] = PACKAGES + ("examples",)) -> list[str]:
    out = []
    for folder in folders:
        for path in sorted((root / folder).rglob("*")):
            if path.suffix in SOURCE_SUFFIXES and "target" not in path.parts and "build" not in path.parts:
                for i, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                    if MACHINE_OR_ISSUE.search(line):
                        out.append(f"{path.relative_to(root)}:{i}: {line.strip()[:120]}")
    return out


def test_no_machine_paths_or_issue_numbers_in_code():
    bad = machine_paths_and_issue_numbers(ROOT)
    assert not bad, "; ".join(bad)


def test_the_path_rule_can_fail(tmp_path):
    (tmp_path / "oracle").mkdir()
    (tmp_path / "oracle" / "a.py").write_text("# see /" + "work/shared/x.md\nx = 1  # fixed in iss" + "ue 12\ny = 2\n")
    assert [b.split(":")[1] for b in machine_paths_and_issue_numbers(tmp_path, ("oracle",))] == ["1", "2"]


@functools.lru_cache(maxsize=1)
def _project_violations() -> dict[str, list[str]]:
    return violations(ROOT)  # one parse of the tree for all rules, at run time, not collection


@pytest.mark.parametrize("rule", RULES)
def test_import_rule(rule):
    bad = _project_violations()[rule]
    assert not bad, f"{rule}: " + "; ".join(bad)


def test_rules_catch_a_planted_violation(tmp_path):
    """The checker can fail: a small tree breaking every rule is reported line by line."""
    files = {
        "oracle/__init__.py": "", "oracle/spec.py": "import numpy\nfrom gpu_impl import softmax\n",
        "gpu_impl/__init__.py": "from .kernels import k\nfrom oracle.spec import x\n", "gpu_impl/kernels.py": "",
        "properties/__init__.py": "", "properties/test_a.py": "def test_a():\n    pass\n\n\ndef f():\n    test_a()\n",
        "properties/lib.py": "from properties import test_a\nimport properties.zoo.runner\n",
        "properties/zoo/__init__.py": "", "properties/zoo/runner.py": "from properties.lib import x\n",
        "fixtures/__init__.py": "", "fixtures/gen.py": "from properties.lib import x\n",
        "reports/__init__.py": "from properties.test_a import test_a\n",
        "reports/cli.py": "from properties.api import findings\nfrom properties.peers import findings\n",
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    found = violations(tmp_path)
    assert found["spec and implementation independent"] == ["oracle/spec.py:2 imports gpu_impl",
                                                             "oracle/spec.py:2 imports gpu_impl.softmax",
                                                             "gpu_impl/__init__.py:2 imports oracle.spec",
                                                             "gpu_impl/__init__.py:2 imports oracle.spec.x"]
    assert found["no test module imported"] == ["properties/lib.py:1 imports properties.test_a",
                                                "reports/__init__.py:1 imports properties.test_a"]
    assert found["fixtures never import the judge"] == ["fixtures/gen.py:1 imports properties.lib",
                                                        "fixtures/gen.py:1 imports properties.lib.x"]
    assert found["the CLI uses only the judge's public API"] == [
        "reports/__init__.py:1 imports properties.test_a", "reports/__init__.py:1 imports properties.test_a.test_a",
        "reports/cli.py:2 imports properties.peers", "reports/cli.py:2 imports properties.peers.findings"]
    assert found["only the zoo imports the zoo"] == ["properties/lib.py:2 imports properties.zoo.runner"]
    assert found["no test called as a function"] == ["properties/test_a.py:6 calls test_a"]
