"""R1: identify the regime first. The planner maps the regime before it searches (planner/figures.py);
lint asks a spec to assert the regime it falls in, so CI notices when it moves (KV201)."""

from __future__ import annotations

from kvplan.base.diagnostics import Diagnostic, make
from kvplan.lang import fixes as fx
from kvplan.planner.rules.rule import PinView, Rule, span_of


def lint(v: PinView) -> list[Diagnostic]:
    sc, regime = v.scenario, v.plan.regime_after
    if any(e.metric == "regime" for e in sc.expects):
        return []
    return [make("KV201", f"deployment '{sc.deployment}' does not assert its regime", span_of(sc, "deployment"),
                 help=f"the plan puts it {regime}: add `expect {{ regime == {regime} }}` so CI notices when it moves",
                 fixes=[fx.set_setting(v.source, v.dep, "expect.regime", regime, "==")])]


RULE = Rule("R1", "KV201", "Identify the regime first: compute s* and s_cap for the deployment.", lint=lint)
