"""No re-implemented libraries (issue 20, item 4): no `exec` or `eval` in kvplan/, and lark used only through
its public API (no `_name` of a lark object or module, no private lark module or name imported).

kvplan/grammar/kvp_parser.py is lark's code as its standalone generator writes it (tests.paths.GENERATED): its
insides are lark's own, reached by kvplan through the generated module's entry point, `Lark_StandAlone`.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

from tests.paths import GENERATED, ROOT

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: tomli, a dependency there (pyproject.toml)
    import tomli as tomllib

PACKAGE = ROOT / "kvplan"
#: Where lark's names come from: lark itself and its generated parser.
LARK_MODULES = ("lark", "kvplan.grammar.kvp_parser")


def _sources() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if p not in GENERATED)


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _from_lark(module: str) -> bool:
    return any(module == m or module.startswith(m + ".") for m in LARK_MODULES)


def _private_lark_use(text: str, name: str) -> list[str]:
    """`name:line: what` for each private lark name a module imports or reads, and each exec or eval call, in
    the order of the lines."""
    tree = ast.parse(text, name)
    lark_names: set[str] = set()
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and _from_lark(node.module):
            for alias in node.names:
                lark_names.add(alias.asname or alias.name)
                if _is_private(alias.name) or any(_is_private(p) for p in node.module.split(".")):
                    found.append(f"{name}:{node.lineno}: imports {node.module}.{alias.name}")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _from_lark(alias.name):
                    lark_names.add((alias.asname or alias.name).split(".")[0])
                    if any(_is_private(p) for p in alias.name.split(".")):
                        found.append(f"{name}:{node.lineno}: imports {alias.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _is_private(node.attr):
            root = node.value
            while isinstance(root, ast.Attribute):
                root = root.value
            if isinstance(root, ast.Name) and root.id in lark_names:
                found.append(f"{name}:{node.lineno}: {ast.unparse(node)}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("exec", "eval"):
            found.append(f"{name}:{node.lineno}: {node.func.id}(...)")
    return sorted(found, key=lambda hit: int(hit.split(":")[1]))


def test_kvplan_runs_no_exec_and_no_private_lark_api() -> None:
    paths = _sources()
    assert len(paths) > 20
    found = [hit for p in paths
             for hit in _private_lark_use(p.read_text(encoding="utf-8"), str(p.relative_to(ROOT)))]
    assert found == [], "exec, eval or private lark API in kvplan/:\n" + "\n".join(found)


def test_no_source_text_calls_exec_or_lark_privately() -> None:
    # The text as well as the syntax tree: `exec(` or `Lark._` in a string run later, or reached another way.
    found = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}" for p in _sources()
             for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1)
             if re.search(r"\bexec\(|\bLark\._|_load_from_dict|lark\.[\w.]*\._", line)]
    assert found == [], "\n".join(found)


def test_the_check_sees_exec_and_private_lark_api() -> None:
    probe = ("import lark\nfrom lark import Lark, Token\nfrom lark.lexer import _private\n"
             "import lark._internal\nfrom kvplan.grammar.kvp_parser import Lark as L\n"
             "p = Lark._load_from_dict({}, {})\nq = L._load({})\nr = lark.lexer._x\nt = Token.__new__\n"
             "exec('x = 1')\nv = other._private\n")
    assert _private_lark_use(probe, "p.py") == [
        "p.py:3: imports lark.lexer._private", "p.py:4: imports lark._internal", "p.py:6: Lark._load_from_dict",
        "p.py:7: L._load", "p.py:8: lark.lexer._x", "p.py:10: exec(...)"]


def test_the_generated_parser_is_left_out_of_ruff_and_mypy_by_the_same_list() -> None:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    paths = sorted(p.relative_to(ROOT).as_posix() for p in GENERATED)
    modules = sorted(p.relative_to(ROOT).with_suffix("").as_posix().replace("/", ".") for p in GENERATED)
    assert sorted(config["tool"]["ruff"]["extend-exclude"]) == paths
    ignored = [o for o in config["tool"]["mypy"]["overrides"] if o.get("ignore_errors")]
    assert [sorted(o["module"]) for o in ignored] == [modules]
