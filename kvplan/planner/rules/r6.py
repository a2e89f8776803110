"""R6: above s_cap, tier or shard, but never read inside a step from a remote tier. The search
shards (more devices, planner/space.py) and the tier is only for reuse between steps; lint
reports a pinned tier standing in for memory the deployment lacks (KV206)."""

from __future__ import annotations

from kvplan.base.diagnostics import Diagnostic, make
from kvplan.planner.rules.rule import PinView, Rule


def lint(v: PinView) -> list[Diagnostic]:
    pin = v.scenario.pins.get("tier")
    short = next((u.shortfall for u in v.plan.unmet if u.constraint == "fits"), None)
    if pin is None or str(pin.value) == "none" or short is None:
        return []
    return [make("KV206", f"{short.human} of KV does not fit in device memory and would be read from the "
                 f"{pin.value} tier inside every decode step", pin.span,
                 help="shard over more devices or shrink the KV; use the tier only for reuse between steps (R6)")]


RULE = Rule("R6", "KV206", "Above s_cap, tier or shard — but never read inside a step from a remote tier.", lint=lint)
