"""Design rules as modules: a rejection is a typed record, the registry is a literal table, and a
rule registered through the documented hook (kvplan.planner.rules.with_rules) filters the search
and reports on a pinned choice, with no other edit (docs/architecture.md, "A design rule")."""

from __future__ import annotations

import ast
from typing import Optional

import pytest

from kvplan.base.codes import CODES, Code, Severity, Stage
from kvplan.base.diagnostics import Diagnostic, make
from kvplan.catalog import settings
from kvplan.planner import plan
from kvplan.planner.lint import findings
from kvplan.planner.plan import Rejection
from kvplan.planner.rules import RULES, PinView, Rule, SearchView, with_rules
from tests.paths import ROOT
from tests.unit.planner.test_planner import WL, scenario, spec

PLANNER = ROOT / "kvplan" / "planner"


def _toy_reject(v: SearchView, i: int) -> Optional[Rejection]:
    if v.ev.dtype[i] != "int2" or v.pinned(settings.pin("kv_dtype")):
        return None
    return Rejection("R9", "2-bit KV is not certified on this fleet")


def _toy_lint(v: PinView) -> list[Diagnostic]:
    pin = v.scenario.pins.get("kv_dtype")
    if pin is None or pin.value != "int2":
        return []
    return [make("KV299", "kv_dtype int2 is pinned, and 2-bit KV is not certified on this fleet", pin.span)]


@pytest.fixture
def toy(monkeypatch: pytest.MonkeyPatch) -> Rule:
    """A rule module's `RULE`, and the code-table row a real rule adds to kvplan/base/codes.py."""
    monkeypatch.setitem(CODES, "KV299", Code("KV299", "toy-rule", Stage.RULE, Severity.WARNING,
                                             "A toy rule."))
    return Rule("R9", "KV299", "Do not store 2-bit KV.", reject=_toy_reject, lint=_toy_lint)


MODERATE = "    quality { budget = moderate }"


def test_registry_is_the_eight_rules_in_order_each_with_its_code_and_page() -> None:
    assert list(RULES) == [f"R{k}" for k in range(1, 9)]
    for rid, rule in RULES.items():
        assert rule.code == f"KV20{rid[1]}" and CODES[rule.code].stage is Stage.RULE
        assert rule.doc == f"docs/rules/{rid}.md"
    # the filters the search asks, in this order (the first rejection names the candidate)
    assert [r.id for r in RULES.values() if r.reject is not None] == ["R3", "R4", "R8"]
    assert [r.id for r in RULES.values() if r.yields is not None] == ["R3"]


def test_a_rule_code_must_be_a_rule_row_of_the_code_table() -> None:
    with pytest.raises(ValueError, match="not a `rule` row"):
        Rule("R9", "KV298", "no such code")
    with pytest.raises(ValueError, match="not a `rule` row"):
        Rule("R9", "KV301", "a plan code, not a rule code")
    with pytest.raises(ValueError, match="taken"):
        with_rules(Rule("R3", "KV203", "R3 again"))


def test_no_planner_code_reads_rule_identity_out_of_words() -> None:
    # `reject[i].startswith(("R4", "R8"))` and friends: a rejection's rule is read from its record
    for f in sorted(PLANNER.rglob("*.py")):
        for node in ast.walk(ast.parse(f.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "startswith":
                text = ast.unparse(node)
                assert "reject" not in text and "why" not in text, f"{f.name}: {text}"


def test_toy_rule_reports_on_a_pin(toy: Rule) -> None:
    text = spec(WL.format(b=8, s="128k") + "\npin { kv_dtype = int2 }", extra=MODERATE)
    sc = scenario(text)
    rules = with_rules(toy)
    p = plan(sc, rules=rules)
    assert p.kv_dtype.id == "int2"  # a pin is kept: the operator decided, lint reports it
    found = [d for d in findings(sc, p, rules=rules) if d.code == "KV299"]
    assert len(found) == 1 and found[0].span is not None and found[0].span.line == text.splitlines().index(
        "pin { kv_dtype = int2 }") + 1
    assert "KV299" not in [d.code for d in findings(sc, plan(sc))]


def test_planner_functions_fit_a_screen() -> None:
    # STYLE.md: a function reads as the steps its docstring names; over 60 lines it says why
    for f in sorted(PLANNER.rglob("*.py")):
        source = f.read_text(encoding="utf-8")
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.end_lineno is not None:
                length = node.end_lineno - node.lineno + 1
                why = any("long:" in ln for ln in lines[node.lineno - 1:node.end_lineno])
                assert length <= 60 or why, f"{f.name}:{node.lineno} {node.name} is {length} lines"
