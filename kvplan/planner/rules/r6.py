"""R6: above s_cap, tier or shard, but never read inside a step from a remote tier. The search
shards (more devices, planner/space.py) and the tier is only for reuse between steps; lint
reports a pinned tier standing in for memory the deployment lacks (KV206)."""

from __future__ import annotations

from kvplan.base.diagnostics import Diagnostic, make
from kvplan.catalog import settings
from kvplan.planner.plan import Constraint
from kvplan.planner.rules.rule import PinView, Rule


def lint(v: PinView) -> list[Diagnostic]:
    tier = v.scenario.pinned.tier
    short = next((u.shortfall for u in v.plan.unmet if u.constraint is Constraint.FITS), None)
    if tier is None or tier == "none" or short is None:
        return []
    return [make("KV206", f"{short.human} of KV does not fit in device memory and would be read from the "
                 f"{tier} tier inside every decode step", v.scenario.pinned.span(settings.pin("tier")),
                 help="shard over more devices or shrink the KV; use the tier only for reuse between steps (R6)")]


RULE = Rule("R6", "KV206", "Above s_cap, tier or shard — but never read inside a step from a remote tier.", lint=lint)
