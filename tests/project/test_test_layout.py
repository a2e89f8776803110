"""The tests mirror the package's layers (docs/architecture.md, "Where tests go").

tests/unit/<layer>/ holds the unit tests of one layer: they import that layer and the layers below
it, never the CLI; tests/acceptance/ runs the `kvplan` command end to end; tests/project/ checks
the repository itself. No test file sits at the top of tests/, where it would belong to no layer.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator

from tests.paths import ROOT
from tests.project.test_layers import LAYERS, MODULES, layer_of

TESTS = ROOT / "tests"
#: What may sit at the top of tests/ besides the three folders: shared set-up, no tests.
TOP_LEVEL = {"__init__.py", "conftest.py", "paths.py"}
KINDS = ("unit", "acceptance", "project")
UNIT_LAYERS = tuple(layer for layer in LAYERS if layer != "cli")


def misplaced(tests: Path) -> list[str]:
    """Python files under `tests` that are not in unit/<layer>/, acceptance/ or project/."""
    out = []
    for f in sorted(tests.rglob("*.py")):
        parts = f.relative_to(tests).parts
        if len(parts) == 1:
            ok = parts[0] in TOP_LEVEL
        elif parts[0] == "unit":
            ok = len(parts) == 3 and parts[1] in UNIT_LAYERS or parts == ("unit", "__init__.py")
        else:
            ok = parts[0] in KINDS[1:] and len(parts) == 2
        if not ok:
            out.append("/".join(parts))
    return out


def _module_layer(name: str) -> str | None:
    """The layer of an imported kvplan module (the longest known prefix), or None outside kvplan."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return layer_of(name) if name else None


def _imported(tree: ast.AST) -> Iterator[tuple[int, str]]:
    """(line, dotted name) of every import, at module level or inside a function."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                yield node.lineno, a.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            for a in node.names:
                yield node.lineno, f"{node.module}.{a.name}"


def upward_imports(layer: str, source: str, where: str = "<test>") -> list[str]:
    """What a unit test of `layer` imports from above it: a higher kvplan layer, the CLI, click's
    test runner, an acceptance or project test, or a unit test of a higher layer."""
    rank = LAYERS.index(layer)
    found = []
    for line, name in _imported(ast.parse(source, where)):
        above = None
        if name.startswith("kvplan"):
            target = _module_layer(name)
            if target is not None and LAYERS.index(target) > rank:
                above = target
        elif name.startswith("click.testing"):
            above = "cli (click's CliRunner)"
        elif name.startswith(("tests.acceptance", "tests.project")):
            above = name.split(".")[1]
        elif name.startswith("tests.unit."):
            target = name.split(".")[2]
            if target not in UNIT_LAYERS or UNIT_LAYERS.index(target) > rank:
                above = f"unit tests of {target}"
        if above:
            found.append(f"{where}:{line}: imports {name} ({above}), above {layer}")
    if '"-m", "kvplan"' in source:
        found.append(f"{where}: runs the kvplan command (an acceptance test)")
    return found


def _unit_files() -> list[Path]:
    return sorted((TESTS / "unit").glob("*/test_*.py"))


def test_every_test_file_sits_in_unit_acceptance_or_project() -> None:
    assert misplaced(TESTS) == [], ("move each into tests/unit/<layer>/, tests/acceptance/ or tests/project/ "
                                    "(docs/architecture.md, \"Where tests go\")")


def test_there_are_unit_tests_of_every_layer_below_the_cli() -> None:
    assert sorted({f.parent.name for f in _unit_files()}) == sorted(UNIT_LAYERS)


def test_a_unit_test_imports_only_its_layer_and_below() -> None:
    found = [m for f in _unit_files()
             for m in upward_imports(f.parent.name, f.read_text(encoding="utf-8"), f.relative_to(ROOT).as_posix())]
    assert not found, "unit tests that reach above their layer (move each test to its layer, or to acceptance/):\n" + \
        "\n".join(found)


def test_the_checks_see_a_misplaced_file_and_an_upward_import(tmp_path: Path) -> None:
    for name in ("conftest.py", "test_flat.py", "unit/lang/test_ok.py", "unit/test_no_layer.py",
                 "unit/cli/test_cli.py", "acceptance/test_ok.py", "other/test_x.py"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("", encoding="utf-8")
    assert misplaced(tmp_path) == ["other/test_x.py", "test_flat.py", "unit/cli/test_cli.py", "unit/test_no_layer.py"]

    below = "from kvplan.base.units import Dim\nfrom kvplan import catalog\nimport kvplan.grammar\n"
    assert upward_imports("lang", below) == []
    assert upward_imports("lang", "from tests.unit.base.test_units import X\n") == []
    up = ("from kvplan.planner import plan\n"
          "def test_x():\n    from kvplan.cli import main\n"
          "from click.testing import CliRunner\n"
          "from kvplan import render\n"
          "from tests.unit.app.test_backends import files\n"
          "from tests.acceptance.test_fmt import MESSY\n")
    assert sorted(m.split(": imports ")[1].split(" (")[0] for m in upward_imports("lang", up)) == [
        "click.testing.CliRunner", "kvplan.cli.main", "kvplan.planner.plan", "kvplan.render",
        "tests.acceptance.test_fmt.MESSY", "tests.unit.app.test_backends.files"]
    assert upward_imports("lang", 'subprocess.run([sys.executable, "-m", "kvplan", "lint"])\n')
