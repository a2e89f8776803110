"""Engines only write (issue 20, item 2): no module under kvplan/engines/ imports from the planner but the Plan
record, read from the source with `ast` as tests/project/test_layers.py reads the layers."""

from __future__ import annotations

import ast

from tests.project.test_layers import MODULES, _imports

#: The one name an engine module may take from kvplan.planner: the finished plan it writes.
ALLOWED = ("kvplan.planner.plan", "Plan")


def _planner_imports(module: str) -> list[str]:
    """Each import of kvplan.planner in `module` other than `from kvplan.planner.plan import Plan`."""
    found = []
    for node, _, names in _imports(module):
        base = names[0]
        if base != "kvplan.planner" and not base.startswith("kvplan.planner."):
            if not any(n == "kvplan.planner" or n.startswith("kvplan.planner.") for n in names):
                continue
        taken = [a.name for a in node.names] if isinstance(node, ast.ImportFrom) else []
        if isinstance(node, ast.ImportFrom) and base == ALLOWED[0] and taken == [ALLOWED[1]]:
            continue
        found.append(f"{MODULES[module].name}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_engine_module_imports_the_planner_beyond_the_plan_record() -> None:
    found = [line for m in MODULES if m.startswith("kvplan.engines") for line in _planner_imports(m)]
    assert not found, "engine modules that reach into the planner (plan in kvplan/app/):\n" + "\n".join(found)


def test_the_check_sees_a_planner_import() -> None:
    # the modules that plan (kvplan/app/) import the planner beyond Plan; the check must see it there
    assert _planner_imports("kvplan.app.replan")
    assert not _planner_imports("kvplan.engines.common")
