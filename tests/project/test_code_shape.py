"""The shape of kvplan's own code (issue 10, builds 2 and 3): no parameter or field of its types says `Any`,
and no function runs over 60 lines without a comment saying why."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.paths import GENERATED, ROOT

PACKAGE = ROOT / "kvplan"


def _sources() -> list[Path]:
    """Every module of the package, every layer, less lark's generated parser (tests.paths.GENERATED)."""
    return sorted(p for p in PACKAGE.rglob("*.py") if p not in GENERATED)


def _mentions_any(node: ast.expr | None) -> bool:
    if node is None:
        return False
    for n in ast.walk(node):
        if isinstance(n, ast.Name) and n.id == "Any" or isinstance(n, ast.Attribute) and n.attr == "Any":
            return True
        if isinstance(n, ast.Constant) and isinstance(n.value, str) and "Any" in n.value:
            return True  # a quoted annotation
    return False


def _any_annotations(text: str, name: str) -> list[str]:
    """`name:line: parameter x` / `field y` for each annotation of a parameter or a class field that says Any."""
    found = []
    for node in ast.walk(ast.parse(text, name)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
            a = node.args
            for arg in [*a.posonlyargs, *a.args, *a.kwonlyargs, *filter(None, (a.vararg, a.kwarg))]:
                if _mentions_any(arg.annotation):
                    found.append(f"{name}:{arg.lineno}: parameter {arg.arg}")
        elif isinstance(node, ast.ClassDef):
            for st in node.body:
                if isinstance(st, ast.AnnAssign) and _mentions_any(st.annotation):
                    found.append(f"{name}:{st.lineno}: field {ast.unparse(st.target)}")
    return found


def test_no_parameter_or_field_is_typed_any() -> None:
    paths = _sources()
    assert len(paths) > 20
    found = [hit for p in paths
             for hit in _any_annotations(p.read_text(encoding="utf-8"), str(p.relative_to(PACKAGE.parent)))]
    assert found == [], "annotations that say Any:\n" + "\n".join(found)


def test_the_check_sees_parameters_and_fields_typed_any() -> None:
    src = ("class A:\n    x: Any\n    y: int\n\n"
           "def f(a: 'dict[str, Any]', b: int, *c: typing.Any, **d: object) -> Any:\n    z: Any = 1\n")
    assert _any_annotations(src, "probe.py") == ["probe.py:2: field x", "probe.py:5: parameter a",
                                                 "probe.py:5: parameter c"]


# ------------------------------------------------------------------ long functions (issue 10 build 3)

#: A function this long needs a comment saying why (on its `def` line or the line above it).
MAX_LINES = 60


def _long_functions(text: str, name: str) -> list[str]:
    lines = text.splitlines()
    found = []
    for node in ast.walk(ast.parse(text, name)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            length = (node.end_lineno or node.lineno) - node.lineno + 1
            said = "#" in lines[node.lineno - 1] or lines[node.lineno - 2].lstrip().startswith("#")
            if length > MAX_LINES and not said:
                found.append(f"{name}:{node.lineno}: {node.name} is {length} lines")
    return found


def test_no_long_function_without_a_reason() -> None:
    paths = _sources()
    found = [hit for p in paths
             for hit in _long_functions(p.read_text(encoding="utf-8"), str(p.relative_to(PACKAGE.parent)))]
    assert found == [], f"functions over {MAX_LINES} lines with no comment saying why:\n" + "\n".join(found)


def test_the_length_check_counts_lines_and_sees_the_reason() -> None:
    body = "".join(f"    x{i} = {i}\n" for i in range(MAX_LINES))
    assert _long_functions(f"\n\ndef f() -> None:\n{body}", "p.py") == [f"p.py:3: f is {MAX_LINES + 1} lines"]
    assert _long_functions(f"\n# a flat table\ndef f() -> None:\n{body}", "p.py") == []
    assert _long_functions(f"\n\ndef f() -> None:\n{body[:-len('    x59 = 59')-1]}", "p.py") == []


# ------------------------------------------------------------------ rooms sized to their job (issue 20 item 3)

#: The most lines a module of kvplan may have (issue 20: "no module over 800 lines").
MAX_MODULE_LINES = 800


def _long_modules(paths: list[Path], root: Path) -> list[str]:
    """`path: n lines` (relative to `root`) for each module over MAX_MODULE_LINES."""
    found = []
    for p in paths:
        n = len(p.read_text(encoding="utf-8").splitlines())
        if n > MAX_MODULE_LINES:
            found.append(f"{p.relative_to(root)}: {n} lines")
    return found


def test_no_module_is_over_800_lines() -> None:
    paths = _sources()  # every layer, less lark's generated parser
    assert len(paths) > 60
    found = _long_modules(paths, PACKAGE.parent)
    assert found == [], f"modules over {MAX_MODULE_LINES} lines, to split along their jobs:\n" + "\n".join(found)


def test_the_module_length_check_counts_lines(tmp_path: Path) -> None:
    at, over = tmp_path / "at.py", tmp_path / "over.py"
    at.write_text("x = 1\n" * MAX_MODULE_LINES, encoding="utf-8")
    over.write_text("x = 1\n" * (MAX_MODULE_LINES + 1), encoding="utf-8")
    assert _long_modules([at, over], tmp_path) == [f"over.py: {MAX_MODULE_LINES + 1} lines"]
