"""The package's layers, read from the source with `ast` (docs/architecture.md).

Each layer imports only the layers below it; no import cycle, counting imports inside
functions too; and no import inside a function outside the CLI, except the documented
lazy loads of optional heavy dependencies, which only one command needs, and the commands'
core (kvplan/app/) loading kvplan's own modules when its command runs, as the CLI does (a spec
with errors never loads the planner; start-up is a feature of a CLI run in CI loops).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Iterator, Optional

import pytest

from tests.paths import GENERATED, ROOT

PACKAGE = ROOT / "kvplan"

#: Bottom to top. A module's layer is its package under kvplan/ (kvplan.grammar holds the
#: language's grammar and the parser generated from it, so it is lang; kvplan/__init__.py holds only the version).
LAYERS = ("base", "catalog", "model", "lang", "planner", "engines", "render", "app", "cli")
_PLACES = {"kvplan": "base", "kvplan.grammar": "lang", "kvplan.grammar.kvp_parser": "lang", "kvplan.cli": "cli",
           "kvplan.__main__": "cli"}

#: (module, top-level package it may import inside a function, why).
LAZY_LOADS = (
    ("kvplan.render.plot", "matplotlib", "the `plot` extra: only `map --plot` and `report` draw"),
    ("kvplan.render.report", "matplotlib", "the `plot` extra: the regime-map picture is optional"),
    ("kvplan.model.sweep", "pyarrow", "the `parquet` extra: only `sweep --format parquet` writes Parquet"),
    ("kvplan.engines.trtllm", "yaml", "PyYAML is optional: only `kvplan import` of a YAML manifest needs it"),
    ("kvplan.catalog.hub", "huggingface_hub", "about 0.1 s to import: only a repo id outside the catalog needs it"),
    ("kvplan.base.near", "difflib", "about 1 ms of every start-up: only a misspelt word needs it"),
    ("kvplan.engines.kernels.flashinfer_decode", "torch",
     "the kernel benchmark kvplan writes out: torch is on the GPU machine that runs it, not kvplan's dependency"),
    ("kvplan.engines.kernels.flashinfer_decode", "flashinfer",
     "the kernel benchmark kvplan writes out: FlashInfer is on the GPU machine that runs it, not kvplan's dependency"),
)


def _modules() -> dict[str, Path]:
    out = {}
    for f in sorted(PACKAGE.rglob("*.py")):
        parts = list(f.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = f
    return out


MODULES = _modules()


def layer_of(module: str) -> str:
    if module in _PLACES:
        return _PLACES[module]
    layer = module.split(".")[1]
    assert layer in LAYERS, f"{module} is in no layer: put it in one of {LAYERS}"
    return layer


def _resolve(name: str) -> Optional[str]:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str) -> Iterator[tuple[ast.stmt, bool, list[str]]]:
    """Each import statement of `module`: the node, whether it sits in a function, the names it imports."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    is_pkg = path.name == "__init__.py"

    def walk(node: ast.AST, in_function: bool) -> Iterator[tuple[ast.stmt, bool, list[str]]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import):
                yield child, in_function, [a.name for a in child.names]
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = module.split(".") if is_pkg else module.split(".")[:-1]
                    anchor = anchor[: len(anchor) - (child.level - 1)]
                    base = ".".join(anchor + ([base] if base else []))
                yield child, in_function, [base] + [f"{base}.{a.name}" for a in child.names]
            else:
                walk_in = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
                yield from walk(child, walk_in)

    yield from walk(tree, False)


def _edges() -> dict[str, set[str]]:
    """module -> the kvplan modules it imports (a package's own __init__ excluded for its submodules)."""
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for m in MODULES:
        for _, _, names in _imports(m):
            for name in names:
                if name.split(".")[0] != "kvplan":
                    continue
                target = _resolve(name)
                if target and target != m and not (m.startswith(target + ".") and name == target):
                    graph[m].add(target)
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            v, children = work[-1]
            w = next(children, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(graph[w]))))
                elif w in on_stack:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_every_module_has_a_layer() -> None:
    for m in MODULES:
        layer_of(m)


def test_no_import_goes_up_a_layer() -> None:
    up = []
    for m, targets in _edges().items():
        for t in sorted(targets):
            if LAYERS.index(layer_of(t)) > LAYERS.index(layer_of(m)):
                up.append(f"{m} ({layer_of(m)}) imports {t} ({layer_of(t)})")
    assert not up, "imports that go up a layer:\n" + "\n".join(up)


def test_no_import_cycle() -> None:
    assert _cycles(_edges()) == []


def _lazy_allowed(module: str, package: str) -> bool:
    """Whether `module` may import `package` inside a function: a documented lazy load, or the commands' core
    loading one of kvplan's own modules (never another package's)."""
    return (module, package) in {(m, pkg) for m, pkg, _ in LAZY_LOADS} or (layer_of(module) == "app"
                                                                           and package == "kvplan")


def test_no_function_level_import_outside_the_cli() -> None:
    found = []
    for m in MODULES:
        if layer_of(m) == "cli" or MODULES[m] in GENERATED:  # lark's generated parser imports as lark does
            continue
        for node, in_function, names in _imports(m):
            if in_function and not _lazy_allowed(m, names[0].split(".")[0]):
                found.append(f"{MODULES[m].relative_to(PACKAGE.parent)}:{node.lineno}: {ast.unparse(node)}")
    assert not found, "imports inside functions (move them to the top of the module):\n" + "\n".join(found)


@pytest.mark.parametrize("module,package,why", LAZY_LOADS)
def test_each_documented_lazy_load_is_still_there(module: str, package: str, why: str) -> None:
    assert any(in_function and names[0].split(".")[0] == package for _, in_function, names in _imports(module)), why


def test_the_commands_core_may_load_only_kvplan_modules_lazily() -> None:
    assert _lazy_allowed("kvplan.app.spec", "kvplan")
    assert not _lazy_allowed("kvplan.app.spec", "difflib")
    assert not _lazy_allowed("kvplan.planner.search", "kvplan")
    assert _lazy_allowed("kvplan.base.near", "difflib")


def test_the_checks_see_a_cycle_and_an_upward_import() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert LAYERS.index(layer_of("kvplan.render.plan_view")) > LAYERS.index(layer_of("kvplan.planner.plan"))
